package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The reasons and messages of the conditions this controller owns, the
// kubelet's.
const (
	reasonReady             = "KubeletReady"
	reasonNotReady          = "KubeletNotReady"
	reasonSufficientMemory  = "KubeletHasSufficientMemory"
	reasonNoDiskPressure    = "KubeletHasNoDiskPressure"
	reasonSufficientPID     = "KubeletHasSufficientPID"
	messageReady            = "agent is posting ready status"
	messageSufficientMemory = "agent has sufficient memory available"
	messageNoDiskPressure   = "agent has no disk pressure"
	messageSufficientPID    = "agent has sufficient PID available"
)

// facts are the parts of the Node this controller owns that do not change
// while it runs: computed once when Run starts. They are pure data.
type facts struct {
	labels      map[string]string
	capacity    v1.ResourceList
	allocatable v1.ResourceList
	addresses   []v1.NodeAddress
	nodeInfo    v1.NodeSystemInfo
	kubeletPort int32
	declared    []string // sorted
}

// newFacts computes the facts of opts (defaults applied) on machine m, with
// internalIP (nil for none).
func newFacts(opts Options, m Machine, internalIP net.IP) facts {
	f := facts{labels: maps.Clone(opts.Labels), kubeletPort: opts.KubeletPort}
	if len(opts.DeclaredFeatures) > 0 {
		f.declared = slices.Clone(opts.DeclaredFeatures)
		slices.Sort(f.declared)
		f.declared = slices.Compact(f.declared)
	}
	f.labels[LabelHostname] = opts.Hostname
	f.labels[LabelOS] = m.OperatingSystem
	f.labels[LabelArch] = m.Architecture

	f.capacity = v1.ResourceList{
		v1.ResourceCPU:    quantity(v1.ResourceCPU, m.CPUs),
		v1.ResourceMemory: quantity(v1.ResourceMemory, m.MemoryBytes),
		v1.ResourcePods:   quantity(v1.ResourcePods, int64(opts.MaxPods)),
	}
	if m.EphemeralStorageBytes > 0 {
		f.capacity[v1.ResourceEphemeralStorage] = quantity(v1.ResourceEphemeralStorage, m.EphemeralStorageBytes)
	}
	for name, q := range HugePagesCapacity(m.HugePages) {
		f.capacity[name] = q
	}
	for name, q := range opts.Capacity {
		f.capacity[name] = q.DeepCopy()
	}
	var eviction v1.ResourceList
	if opts.HardEvictionReserved != nil {
		eviction = opts.HardEvictionReserved(f.capacity.DeepCopy())
	}
	f.allocatable = Allocatable(f.capacity, opts.Reserved, opts.SystemReserved, opts.KubeReserved, eviction)

	if internalIP != nil {
		f.addresses = append(f.addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: internalIP.String()})
	}
	f.addresses = append(f.addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: opts.Hostname})

	f.nodeInfo = v1.NodeSystemInfo{
		MachineID:       m.MachineID,
		SystemUUID:      m.SystemUUID,
		BootID:          m.BootID,
		KernelVersion:   m.KernelVersion,
		OSImage:         m.OSImage,
		KubeletVersion:  opts.AgentVersion,
		OperatingSystem: m.OperatingSystem,
		Architecture:    m.Architecture,
	}
	return f
}

// newNode is the Node this controller creates.
func (f facts) newNode(name string, taints []v1.Taint, runtimeVersion string, health error, now time.Time) *v1.Node {
	return f.newNodeObserved(name, taints, observed{runtimeVersion: runtimeVersion, health: health}, now)
}

func (f facts) newNodeObserved(name string, taints []v1.Taint, obs observed, now time.Time) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: maps.Clone(f.labels), Annotations: versionAnnotations()},
		Spec:       v1.NodeSpec{Taints: append([]v1.Taint(nil), taints...)},
	}
	n.Status = f.statusOf(v1.NodeStatus{}, obs, now)
	return n
}

// status returns old with the parts this controller owns replaced: the
// capacity and allocatable resources it sets (others are kept), the
// addresses, the nodeInfo, the kubelet endpoint's port, the declared features, and the Ready, MemoryPressure, DiskPressure and
// PIDPressure conditions (others are kept). Every owned condition gets now
// as its heartbeat; its transition time is now only when its status
// changed.
func (f facts) status(old v1.NodeStatus, runtimeVersion string, health error, now time.Time) v1.NodeStatus {
	return f.statusOf(old, observed{runtimeVersion: runtimeVersion, health: health}, now)
}

// statusOf is status with everything observed: the pressure conditions
// set True, status.images, status.runtimeHandlers and status.features
// replaced when obs has them.
func (f facts) statusOf(old v1.NodeStatus, obs observed, now time.Time) v1.NodeStatus {
	runtimeVersion, health := obs.runtimeVersion, obs.health
	s := *old.DeepCopy()
	if s.Capacity == nil {
		s.Capacity = v1.ResourceList{}
	}
	if s.Allocatable == nil {
		s.Allocatable = v1.ResourceList{}
	}
	for name, q := range f.capacity {
		s.Capacity[name] = q.DeepCopy()
	}
	for name, q := range f.allocatable {
		s.Allocatable[name] = q.DeepCopy()
	}
	s.Addresses = append([]v1.NodeAddress(nil), f.addresses...)
	s.NodeInfo = f.nodeInfo
	s.NodeInfo.ContainerRuntimeVersion = runtimeVersion
	s.DaemonEndpoints.KubeletEndpoint.Port = f.kubeletPort
	s.DeclaredFeatures = slices.Clone(f.declared)

	if obs.images != nil {
		s.Images = obs.images
	}
	if obs.runtimeHandlers != nil {
		s.RuntimeHandlers = obs.runtimeHandlers
	}
	if obs.features != nil {
		s.Features = obs.features
	}
	t := metav1.NewTime(now)
	for _, want := range ownedConditions(health, obs.pressure) {
		want.LastHeartbeatTime = t
		want.LastTransitionTime = t
		i := conditionIndex(s.Conditions, want.Type)
		if i < 0 {
			s.Conditions = append(s.Conditions, want)
			continue
		}
		if s.Conditions[i].Status == want.Status {
			want.LastTransitionTime = s.Conditions[i].LastTransitionTime
		}
		s.Conditions[i] = want
	}
	return s
}

// ownedConditions are the conditions this controller sets, in the
// kubelet's order, without times.
func ownedConditions(health error, pressure []v1.NodeConditionType) []v1.NodeCondition {
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: reasonReady, Message: messageReady}
	if health != nil {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: reasonNotReady, Message: health.Error()}
	}
	cs := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: reasonSufficientMemory, Message: messageSufficientMemory},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: reasonNoDiskPressure, Message: messageNoDiskPressure},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: reasonSufficientPID, Message: messageSufficientPID},
		ready,
	}
	for _, p := range pressure {
		if c, ok := pressureCondition(p); ok {
			cs[conditionIndex(cs, p)] = c
		}
	}
	return cs
}

func conditionIndex(cs []v1.NodeCondition, t v1.NodeConditionType) int {
	for i := range cs {
		if cs[i].Type == t {
			return i
		}
	}
	return -1
}

// statusChanged reports whether two statuses differ in more than the
// conditions' heartbeat times, the kubelet's nodeStatusHasChanged.
// Only the conditions are copied (to clear their heartbeats); the rest of
// each status is compared in place, read only: a pass of every node every
// StatusUpdateFrequency costs no copy of its images and addresses.
// Equal protobuf encodings (the API's own, map keys sorted) are equal
// statuses, and comparing them costs a fraction of apimachinery's
// reflection; different encodings are compared semantically (a quantity
// may be spelt two ways).
func statusChanged(old, new v1.NodeStatus) bool {
	old.Conditions, new.Conditions = withoutHeartbeats(old.Conditions), withoutHeartbeats(new.Conditions)
	ob, oerr := old.Marshal()
	nb, nerr := new.Marshal()
	if oerr == nil && nerr == nil && bytes.Equal(ob, nb) {
		return false
	}
	return !equality.Semantic.DeepEqual(old, new)
}

// withoutHeartbeats returns a copy of conds with zero LastHeartbeatTimes.
func withoutHeartbeats(conds []v1.NodeCondition) []v1.NodeCondition {
	if conds == nil {
		return nil
	}
	out := make([]v1.NodeCondition, len(conds))
	for i, c := range conds {
		c.LastHeartbeatTime = metav1.Time{}
		out[i] = c
	}
	return out
}

// statusPatch is the strategic merge patch that turns old's status into
// status, with old's UID as a precondition: the API server rejects it if
// the Node was replaced meanwhile.
func statusPatch(old *v1.Node, status v1.NodeStatus) ([]byte, error) {
	oldData, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("node: encoding the node: %w", err)
	}
	n := old.DeepCopy()
	n.Status = status
	newData, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("node: encoding the node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node: computing the status patch: %w", err)
	}
	return withUID(patch, old.UID)
}

// labelsPatch is the strategic merge patch that sets the labels of want
// that node lacks or has other values for, with node's UID as a
// precondition; nil when there are none.
func labelsPatch(node *v1.Node, want map[string]string) ([]byte, error) {
	set := map[string]string{}
	for k, v := range want {
		if cur, ok := node.Labels[k]; !ok || cur != v {
			set[k] = v
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": set}})
	if err != nil {
		return nil, fmt.Errorf("node: encoding the labels patch: %w", err)
	}
	return withUID(patch, node.UID)
}

// withUID adds metadata.uid to a JSON merge or strategic merge patch.
func withUID(patch []byte, uid any) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("node: decoding a patch: %w", err)
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["uid"] = uid
	m["metadata"] = meta
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("node: encoding a patch: %w", err)
	}
	return out, nil
}
