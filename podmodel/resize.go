package podmodel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// The messages of a resize the kubelet refuses (PodResizePending, reason
// Infeasible) whatever the node's load.
const (
	ResizeMessageStaticPod  = "In-place resize of static-pods is not supported"
	ResizeMessageQOSChange  = "Pod QOS Class may not change as a result of resizing"
	ResizeMessageOnlyCPUMem = "only cpu and memory resources are mutable"
)

// Allocation is the resources allocated to a pod's containers, by
// container name, and to the pod (spec.resources, under PodLevelKey): the
// resources the pod was admitted, or last resized, with. It is read-only
// once built; Get looks a name up. Its JSON form is an object by name.
//
// It is a list rather than a map because the agent holds one for every
// pod it runs: a map's smallest table has room for eight entries (over 250
// bytes), where most pods have one or two.
type Allocation []AllocatedResources

// AllocatedResources is the resources allocated under one name of an
// Allocation.
type AllocatedResources struct {
	// Name is the container's, or PodLevelKey.
	Name      string
	Resources v1.ResourceRequirements
}

// PodLevelKey is the key of the pod-level resources in an Allocation; no
// container has an empty name.
const PodLevelKey = ""

// Get returns the resources allocated under name, and whether a has them.
func (a Allocation) Get(name string) (*v1.ResourceRequirements, bool) {
	for i := range a {
		if a[i].Name == name {
			return &a[i].Resources, true
		}
	}
	return nil, false
}

// MarshalJSON encodes a as an object of the resources by name (null when
// nil).
func (a Allocation) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("null"), nil
	}
	m := make(map[string]v1.ResourceRequirements, len(a))
	for _, r := range a {
		m[r.Name] = r.Resources
	}
	return json.Marshal(m)
}

// UnmarshalJSON decodes an object of the resources by name, sorted by
// name (null is a nil Allocation).
func (a *Allocation) UnmarshalJSON(data []byte) error {
	var m map[string]v1.ResourceRequirements
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if m == nil {
		*a = nil
		return nil
	}
	out := make(Allocation, 0, len(m))
	for name, r := range m {
		out = append(out, AllocatedResources{Name: name, Resources: r})
	}
	slices.SortFunc(out, func(x, y AllocatedResources) int { return strings.Compare(x.Name, y.Name) })
	*a = out
	return nil
}

// AllocationOf is the pod's allocation as its spec asks for it.
func AllocationOf(pod *v1.Pod) Allocation {
	n := len(pod.Spec.InitContainers) + len(pod.Spec.Containers)
	if pod.Spec.Resources != nil {
		n++
	}
	a := make(Allocation, 0, n)
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			a = append(a, AllocatedResources{Name: list[i].Name, Resources: *list[i].Resources.DeepCopy()})
		}
	}
	if r := pod.Spec.Resources; r != nil {
		a = append(a, AllocatedResources{Name: PodLevelKey, Resources: *r.DeepCopy()})
	}
	return a
}

// WithAllocation returns the pod with its containers' resources replaced
// by those allocated (the kubelet's UpdatePodFromAllocation), and whether
// any differed: pod itself when none did, else a copy. Containers the
// allocation does not name keep their spec's.
func WithAllocation(pod *v1.Pod, alloc Allocation) (*v1.Pod, bool) {
	if alloc == nil {
		return pod, false
	}
	var out *v1.Pod
	apply := func(list func(*v1.Pod) []v1.Container) {
		for i, c := range list(pod) {
			r, ok := alloc.Get(c.Name)
			if !ok || apiequality.Semantic.DeepEqual(c.Resources, *r) {
				continue
			}
			if out == nil {
				out = pod.DeepCopy()
			}
			list(out)[i].Resources = *r.DeepCopy()
		}
	}
	apply(func(p *v1.Pod) []v1.Container { return p.Spec.InitContainers })
	apply(func(p *v1.Pod) []v1.Container { return p.Spec.Containers })
	if r, ok := alloc.Get(PodLevelKey); ok {
		var have v1.ResourceRequirements
		if pod.Spec.Resources != nil {
			have = *pod.Spec.Resources
		}
		if !apiequality.Semantic.DeepEqual(have, *r) {
			if out == nil {
				out = pod.DeepCopy()
			}
			out.Spec.Resources = r.DeepCopy()
		}
	}
	if out == nil {
		return pod, false
	}
	return out, true
}

// DecideResize is the kubelet's decision on a pod whose spec asks for
// resources other than those allocated to it (allocated: the pod with its
// allocation, WithAllocation): "" when the resize is allocated at once;
// else the PodResizePending reason and message.
//
// The pod-level resources (spec.resources) resize as the containers' do
// (InPlacePodLevelResourcesVerticalScaling, beta and on since 1.36): their
// requests count in the pod's (podmodel.Requests), so that a pod-level
// increase is checked against the node as a container's is.
//
// Infeasible (never allocated as asked): a static pod; a change of QoS
// class or of a resource other than cpu and memory, of a container or of
// the pod (the API server refuses both for the pods it serves, the agent
// for pods of its other sources); requests
// beyond the node's allocatable resources ("Node didn't have enough
// capacity: memory, requested: 4718592000, capacity: 4294967296", memory
// checked first). Deferred (allocated once room is made): the requests do
// not fit beside those allocated to the other active pods ("Node didn't
// have enough resource: cpu, requested: 1500, used: 1000, capacity:
// 2000", cpu checked first).
func DecideResize(pod, allocated *v1.Pod, others []*v1.Pod, allocatable v1.ResourceList) (reason, message string) {
	if IsStatic(pod) {
		return v1.PodReasonInfeasible, ResizeMessageStaticPod
	}
	if QOSClass(pod) != QOSClass(allocated) {
		return v1.PodReasonInfeasible, ResizeMessageQOSChange
	}
	if !apiequality.Semantic.DeepEqual(pod.Spec.Resources, allocated.Spec.Resources) {
		var want, have v1.ResourceRequirements
		if pod.Spec.Resources != nil {
			want = *pod.Spec.Resources
		}
		if allocated.Spec.Resources != nil {
			have = *allocated.Spec.Resources
		}
		if !sameBeyondCPUMemory(want.Requests, have.Requests) || !sameBeyondCPUMemory(want.Limits, have.Limits) {
			return v1.PodReasonInfeasible, ResizeMessageOnlyCPUMem
		}
	}
	// Init containers, restartable (sidecars) or not, resize as app
	// containers do (InPlacePodVerticalScalingInitContainers, on and
	// locked in 1.37).
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			a := FindContainer(allocated, c.Name)
			if a == nil {
				continue
			}
			if !sameBeyondCPUMemory(c.Resources.Requests, a.Resources.Requests) || !sameBeyondCPUMemory(c.Resources.Limits, a.Resources.Limits) {
				return v1.PodReasonInfeasible, ResizeMessageOnlyCPUMem
			}
		}
	}

	want := Requests(pod)
	cpu, mem := want.Cpu().MilliValue(), want.Memory().Value()
	capCPU, capMem := allocatable.Cpu().MilliValue(), allocatable.Memory().Value()
	if mem > capMem {
		return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", mem, capMem)
	}
	if cpu > capCPU {
		return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpu, capCPU)
	}
	var usedCPU, usedMem int64
	for _, o := range others {
		if o.UID == pod.UID {
			continue
		}
		r := Requests(o)
		usedCPU += r.Cpu().MilliValue()
		usedMem += r.Memory().Value()
	}
	if cpu > capCPU-usedCPU {
		return v1.PodReasonDeferred, fmt.Sprintf("Node didn't have enough resource: cpu, requested: %d, used: %d, capacity: %d", cpu, usedCPU, capCPU)
	}
	if mem > capMem-usedMem {
		return v1.PodReasonDeferred, fmt.Sprintf("Node didn't have enough resource: memory, requested: %d, used: %d, capacity: %d", mem, usedMem, capMem)
	}
	return "", ""
}

// sameBeyondCPUMemory reports whether two resource lists agree on every
// resource but cpu and memory.
func sameBeyondCPUMemory(a, b v1.ResourceList) bool {
	for _, pair := range [][2]v1.ResourceList{{a, b}, {b, a}} {
		for name, q := range pair[0] {
			if name == v1.ResourceCPU || name == v1.ResourceMemory {
				continue
			}
			o, ok := pair[1][name]
			if !ok || !q.Equal(o) {
				return false
			}
		}
	}
	return true
}

// The kubelet's event reasons of a resize (pkg/kubelet/events): Normal
// ResizeStarted when a resize is allocated and ResizeCompleted when the
// runtime has it; Warning ResizeDeferred or ResizeInfeasible when it is
// not allocated, and ResizeError when actuating it failed.
const (
	EventResizeStarted    = "ResizeStarted"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeError      = "ResizeError"
)

// resizeContainer and resizeSummary are the JSON of a resize event's
// message, as the kubelet writes it.
type resizeContainer struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources,omitempty"`
}

type resizeSummary struct {
	InitContainers []resizeContainer `json:"initContainers,omitempty"`
	Containers     []resizeContainer `json:"containers,omitempty"`
	Generation     int64             `json:"generation"`
	Error          string            `json:"error,omitempty"`
}

// ResizeEventMessage is the message of a resize event as the kubelet
// words it: the prefix ("Pod resize started", "Pod resize completed",
// "Pod resize error", "Pod resize Deferred", "Pod resize Infeasible"),
// then the resources of the pod's init and app containers, the pod
// generation the event is about and, when not empty, the error (the
// pending reason's message, the failed attempt's error) as JSON:
//
//	Pod resize started: {"containers":[{"name":"app","resources":{"limits":{"cpu":"2"},"requests":{"cpu":"2"}}}],"generation":2}
func ResizeEventMessage(prefix string, pod *v1.Pod, generation int64, errorMessage string) string {
	s := resizeSummary{Generation: generation, Error: errorMessage}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, resizeContainer{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, resizeContainer{Name: c.Name, Resources: c.Resources})
	}
	data, err := json.Marshal(s)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(data)
}
