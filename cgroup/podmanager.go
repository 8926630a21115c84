package cgroup

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
)

// PodManagerOptions configure a PodManager. The zero value manages
// /sys/fs/cgroup/.../kubepods with the kubelet's defaults.
type PodManagerOptions struct {
	// Disabled turns cgroup management off, for an agent on a host whose
	// cgroups it does not own: EnsureNode, UpdatePod, DestroyPod and
	// UpdateQoS do nothing, EnsurePod returns "" (the runtime's default
	// cgroup parent) and Pods returns none. Defaults to false: cgroups are
	// managed.
	Disabled bool
	// Root is the node-level cgroup that holds the QoS and pod cgroups, in
	// cgroupfs form; "nodekit/kubepods" nests it. Defaults to "kubepods".
	Root string
	// CgroupfsRoot is where the cgroup filesystems are mounted (see
	// Detect; a directory laid out by cgroup/cgrouptest works for tests).
	// Defaults to DefaultRoot, /sys/fs/cgroup.
	CgroupfsRoot string
	// Manager, when set, is used instead of the cgroupfs Manager found
	// under CgroupfsRoot. Defaults to nil.
	Manager Manager
	// StateDir is where the manager records the pod cgroups it creates
	// (a file per pod), so that Pods lists only those: two agents whose
	// pod cgroups share Root (the default "kubepods" on one host) never
	// take each other's for orphans, and an agent that restarts with the
	// same StateDir still removes its own. The agent sets it below its
	// RootDir. Defaults to "": no record, every pod cgroup under Root is
	// taken as this manager's (one agent per Root).
	StateDir string

	// DisableCPUQuota leaves CPU limits unenforced: the CFS quota of pod
	// cgroups is -1, as the kubelet's --cpu-cfs-quota=false. Defaults to
	// false: limits are enforced.
	DisableCPUQuota bool
	// CPUCFSQuotaPeriod is the CFS period of pod cgroups (the kubelet's
	// --cpu-cfs-quota-period): a CPU limit allows its share of each period.
	// Between 1ms and 1s. Defaults to 100ms. The per-pod sync gives the
	// runtime manager the same period (PodManager.CPUCFSQuotaPeriod,
	// podruntime.SyncPodOptions.CPUCFSQuotaPeriod) so that the containers'
	// quotas agree.
	CPUCFSQuotaPeriod time.Duration
	// PodPidsLimit is the pids.max of every pod cgroup (the kubelet's
	// --pod-max-pids); -1 writes "max". Defaults to 0: not set.
	PodPidsLimit int64
	// MemoryReservePercent reserves that share of the memory requests of
	// the higher QoS classes away from the lower ones, as the kubelet's
	// --qos-reserved=memory=N%: UpdateQoS limits the burstable cgroup to
	// Allocatable memory less N% of the Guaranteed pods' requests, and the
	// besteffort cgroup to that less N% of the Burstable pods' requests.
	// Between 0 and 100; needs Allocatable memory. Defaults to 0: no
	// reserve.
	MemoryReservePercent int64
	// Allocatable is what the node gives to pods. When set, the root cgroup
	// is limited to it as the kubelet's --enforce-node-allocatable=pods
	// does: cpu.shares from cpu, the memory limit from memory, pids.max
	// from "pid", the hugetlb limits from hugepages-<size> (when it names
	// any). SetAllocatable changes it. Defaults to nil: the root cgroup is
	// not limited.
	Allocatable v1.ResourceList
	// MemoryQoS protects requested memory on cgroup v2 as the kubelet's
	// MemoryQoS feature: memory.min of a pod cgroup is the pod's memory
	// requests, of the burstable cgroup the Burstable pods' requests, of
	// the root the Guaranteed and Burstable pods' requests. Ignored on
	// cgroup v1. Defaults to false.
	MemoryQoS bool

	// Logger receives the manager's logs. Defaults to discarding them.
	Logger logr.Logger
}

func (o *PodManagerOptions) setDefaults() error {
	if o.Root == "" {
		o.Root = "kubepods"
	}
	rel, err := relName(o.Root)
	if err != nil {
		return err
	}
	if rel == "" {
		return errors.New("cgroup: PodManagerOptions.Root must not be the root cgroup")
	}
	o.Root = "/" + rel
	if o.CgroupfsRoot == "" {
		o.CgroupfsRoot = DefaultRoot
	}
	if o.CPUCFSQuotaPeriod == 0 {
		o.CPUCFSQuotaPeriod = QuotaPeriod * time.Microsecond
	}
	if o.CPUCFSQuotaPeriod < time.Millisecond || o.CPUCFSQuotaPeriod > time.Second {
		return fmt.Errorf("cgroup: CPUCFSQuotaPeriod %s is not between 1ms and 1s", o.CPUCFSQuotaPeriod)
	}
	if o.PodPidsLimit < -1 {
		return fmt.Errorf("cgroup: PodPidsLimit %d is below -1", o.PodPidsLimit)
	}
	if o.MemoryReservePercent < 0 || o.MemoryReservePercent > 100 {
		return fmt.Errorf("cgroup: MemoryReservePercent %d is not between 0 and 100", o.MemoryReservePercent)
	}
	for n, q := range o.Allocatable {
		if q.Sign() < 0 {
			return fmt.Errorf("cgroup: Allocatable %s %s is negative", n, q.String())
		}
	}
	if o.MemoryReservePercent > 0 && o.Allocatable.Memory().IsZero() {
		return errors.New("cgroup: MemoryReservePercent needs Allocatable memory")
	}
	o.Allocatable = o.Allocatable.DeepCopy()
	return nil
}

// PodManager keeps the kubelet's cgroup hierarchy for pods:
//
//	<Root>                      Guaranteed pods' parent (kubepods)
//	<Root>/pod<UID>             a Guaranteed pod
//	<Root>/burstable/pod<UID>   a Burstable pod
//	<Root>/besteffort/pod<UID>  a BestEffort pod
//
// The pod cgroup's name is what the runtime gets as the sandbox's cgroup
// parent (cgroupfs driver); the runtime makes the containers' cgroups
// below it.
//
// A PodManager is safe for concurrent use and lives as long as the agent.
// Its first method call that needs the hierarchy (EnsureNode, or any pod
// method) detects the cgroup filesystems and creates the node cgroups.
type PodManager struct {
	opts PodManagerOptions
	log  logr.Logger

	mu    sync.Mutex // guards mgr and alloc
	recMu sync.Mutex // serializes the records of pod cgroups with their creation and removal
	mgr   Manager
	alloc v1.ResourceList
	qosMu sync.Mutex // serializes UpdateQoS and guards qos
	qos   qosTally
}

// CPUCFSQuotaPeriod is the CFS period of the pod cgroups
// (PodManagerOptions.CPUCFSQuotaPeriod, defaulted), which their
// containers share.
func (p *PodManager) CPUCFSQuotaPeriod() time.Duration { return p.opts.CPUCFSQuotaPeriod }

// NewPodManager checks opts and returns a PodManager. It does no I/O.
func NewPodManager(opts PodManagerOptions) (*PodManager, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &PodManager{opts: opts, log: opts.Logger.WithName("cgroup"), alloc: opts.Allocatable}, nil
}

// SetAllocatable sets what the node gives to pods (see
// PodManagerOptions.Allocatable) and, once the node cgroups exist, limits
// the root cgroup to it at once. Nil leaves the root cgroup's limits as
// they are. The agent calls it when it knows the node's capacity, before
// EnsureNode.
func (p *PodManager) SetAllocatable(a v1.ResourceList) error {
	for n, q := range a {
		if q.Sign() < 0 {
			return fmt.Errorf("cgroup: Allocatable %s %s is negative", n, q.String())
		}
	}
	if p.opts.MemoryReservePercent > 0 && a.Memory().IsZero() {
		return errors.New("cgroup: MemoryReservePercent needs Allocatable memory")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alloc = a.DeepCopy()
	if p.mgr == nil || p.opts.Disabled {
		return nil
	}
	return p.mgr.Update(p.opts.Root, nodeConfig(p.alloc))
}

// allocatable is the current Allocatable.
func (p *PodManager) allocatable() v1.ResourceList {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alloc
}

// Enabled reports whether the PodManager manages cgroups.
func (p *PodManager) Enabled() bool { return !p.opts.Disabled }

// QoS cgroup names.
func (p *PodManager) burstable() string  { return p.opts.Root + "/burstable" }
func (p *PodManager) besteffort() string { return p.opts.Root + "/besteffort" }

// EnsureNode detects the cgroup filesystems and creates (or brings up to
// date) the root, burstable and besteffort cgroups: the root limited to
// Allocatable when set, besteffort with cpu.shares 2. It is done once;
// later calls return nil at once. The host must offer the cpu and memory
// controllers (an error matching ErrNotSupported otherwise).
func (p *PodManager) EnsureNode() error {
	if p.opts.Disabled {
		return nil
	}
	_, err := p.manager()
	return err
}

func (p *PodManager) manager() (Manager, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mgr != nil {
		return p.mgr, nil
	}
	mgr := p.opts.Manager
	if mgr == nil {
		var err error
		if mgr, err = Open(p.opts.CgroupfsRoot); err != nil {
			return nil, err
		}
	}
	info := mgr.Info()
	for _, c := range []string{"cpu", "memory"} {
		if !info.Has(c) {
			reason := "not mounted"
			if info.Mode == ModeUnified {
				reason = "not available (cgroup.controllers)"
			}
			return nil, &NotSupportedError{Controller: c, Where: info.Root, Reason: reason}
		}
	}
	ensure := func(name string, rc *ResourceConfig) error {
		if mgr.Exists(name) {
			return mgr.Update(name, rc)
		}
		return mgr.Create(name, rc)
	}
	minShares := uint64(MinShares)
	for _, c := range []struct {
		name string
		rc   *ResourceConfig
	}{
		{p.opts.Root, nodeConfig(p.alloc)},
		{p.burstable(), &ResourceConfig{}},
		{p.besteffort(), &ResourceConfig{CPUShares: &minShares}},
	} {
		if err := ensure(c.name, c.rc); err != nil {
			return nil, err
		}
	}
	p.log.Info("node cgroups ready", "mode", info.Mode.String(), "cgroupfsRoot", info.Root, "root", p.opts.Root, "emulated", info.Emulated)
	p.mgr = mgr
	return mgr, nil
}

// nodeConfig is the kubelet's node allocatable config of the root cgroup
// (getCgroupConfig).
func nodeConfig(a v1.ResourceList) *ResourceConfig {
	rc := &ResourceConfig{}
	if q, ok := a[v1.ResourceCPU]; ok {
		s := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &s
	}
	if q, ok := a[v1.ResourceMemory]; ok && q.Sign() > 0 {
		v := q.Value()
		rc.Memory = &v
	}
	if q, ok := a["pid"]; ok && q.Sign() > 0 {
		v := q.Value()
		rc.PidsLimit = &v
	}
	if h := HugePageLimits(a); len(h) > 0 {
		rc.HugePageLimits = h
	}
	return rc
}

// CgroupName is the name of the pod's cgroup (its cgroupfs path, such as
// "/kubepods/burstable/pod<UID>"), whether or not it exists; "" when the
// PodManager is disabled.
func (p *PodManager) CgroupName(pod *v1.Pod) string {
	if p.opts.Disabled {
		return ""
	}
	switch podmodel.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return p.opts.Root + "/pod" + string(pod.UID)
	case v1.PodQOSBurstable:
		return p.burstable() + "/pod" + string(pod.UID)
	default:
		return p.besteffort() + "/pod" + string(pod.UID)
	}
}

func checkUID(uid types.UID) error {
	if uid == "" || strings.ContainsAny(string(uid), "/\x00") || string(uid) == ".." {
		return fmt.Errorf("cgroup: bad pod UID %q", uid)
	}
	return nil
}

// PodExists reports whether the pod's cgroup exists (false when disabled
// or when the hierarchy cannot be set up).
func (p *PodManager) PodExists(pod *v1.Pod) bool {
	if p.opts.Disabled || checkUID(pod.UID) != nil {
		return false
	}
	mgr, err := p.manager()
	return err == nil && mgr.Exists(p.CgroupName(pod))
}

// podConfig is the pod cgroup's config with the options applied.
func (p *PodManager) podConfig(pod *v1.Pod, info Info) *ResourceConfig {
	rc := ResourceConfigForPodWithPeriod(pod, !p.opts.DisableCPUQuota, p.opts.CPUCFSQuotaPeriod)
	if p.opts.PodPidsLimit != 0 {
		l := p.opts.PodPidsLimit
		rc.PidsLimit = &l
	}
	if p.opts.MemoryQoS && info.Mode == ModeUnified {
		if q, ok := podmodel.Requests(pod)[v1.ResourceMemory]; ok && q.Sign() > 0 {
			v := q.Value()
			rc.MemoryMin = &v
		}
	}
	return rc
}

// EnsurePod creates the pod's cgroup with the limits of
// ResourceConfigForPod (and PodPidsLimit, MemoryQoS) when it does not
// exist, and returns its name for the runtime's cgroup parent
// (podruntime.SyncPodOptions.CgroupParent). An existing cgroup is left as it
// is, as the kubelet does; UpdatePod changes its limits. It returns ""
// and nil when the PodManager is disabled.
//
// Call UpdateQoS with the active pods, this one included, before a pod's
// first EnsurePod, as the kubelet does, so that the burstable cgroup's
// shares count the new pod.
func (p *PodManager) EnsurePod(pod *v1.Pod) (string, error) {
	if p.opts.Disabled {
		return "", nil
	}
	if err := checkUID(pod.UID); err != nil {
		return "", err
	}
	mgr, err := p.manager()
	if err != nil {
		return "", err
	}
	name := p.CgroupName(pod)
	if mgr.Exists(name) {
		return name, nil
	}
	// Recorded before it is made: a crash between the two leaves a
	// record without a cgroup, never a cgroup without its record.
	p.recMu.Lock()
	defer p.recMu.Unlock()
	if err := p.record(pod.UID, name); err != nil {
		return "", err
	}
	if err := mgr.Create(name, p.podConfig(pod, mgr.Info())); err != nil {
		if !mgr.Exists(name) {
			p.forget(pod.UID)
		}
		return "", err
	}
	p.log.V(1).Info("created pod cgroup", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "cgroup", name)
	return name, nil
}

// UpdatePod writes the limits of ResourceConfigForPod to the pod's
// existing cgroup, for a pod whose resources changed. A pod without a
// cgroup gives an error matching ErrNotFound.
func (p *PodManager) UpdatePod(pod *v1.Pod) error {
	return p.SetPodConfig(pod, p.DesiredPodConfig(pod))
}

// DestroyPod kills the processes left in the pod's cgroup (under any QoS
// class), waits until they are gone and removes the cgroup and those the
// runtime made below it from every hierarchy. A pod without a cgroup is
// not an error. It gives up when ctx ends.
func (p *PodManager) DestroyPod(ctx context.Context, uid types.UID) error {
	if p.opts.Disabled {
		return nil
	}
	if err := checkUID(uid); err != nil {
		return err
	}
	mgr, err := p.manager()
	if err != nil {
		return err
	}
	var errs []error
	for _, parent := range []string{p.opts.Root, p.burstable(), p.besteffort()} {
		name := parent + "/pod" + string(uid)
		if err := mgr.Destroy(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.recMu.Lock()
	defer p.recMu.Unlock()
	if err := p.forget(uid); err != nil {
		return err
	}
	p.log.V(1).Info("removed pod cgroup", "podUID", uid)
	return nil
}

// Pods lists the UIDs of the pod cgroups that exist (in any hierarchy)
// and that this manager created (recorded in StateDir; any, without a
// StateDir), sorted, for housekeeping to remove those of pods that are
// gone. The cgroups of another agent sharing Root are left out, as are
// those made before records were kept. A record whose cgroup is gone is
// dropped.
func (p *PodManager) Pods() ([]types.UID, error) {
	if p.opts.Disabled {
		return nil, nil
	}
	mgr, err := p.manager()
	if err != nil {
		return nil, err
	}
	p.recMu.Lock()
	defer p.recMu.Unlock()
	own, recorded, err := p.recorded()
	if err != nil {
		return nil, err
	}
	var uids []types.UID
	for _, parent := range []string{p.opts.Root, p.burstable(), p.besteffort()} {
		children, err := mgr.Children(parent)
		if err != nil {
			return nil, err
		}
		for _, c := range children {
			uid, ok := strings.CutPrefix(path.Base(c), "pod")
			if !ok || uid == "" || recorded && !own[types.UID(uid)] {
				continue
			}
			uids = append(uids, types.UID(uid))
		}
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)
	for uid := range own {
		if _, found := slices.BinarySearch(uids, uid); !found {
			if err := p.forget(uid); err != nil {
				return nil, err
			}
		}
	}
	return uids, nil
}

// Stats reads the usage of the cgroup name (any cgroup, such as a pod's
// or a container's below it); an error when the PodManager is disabled.
func (p *PodManager) Stats(name string) (*Stats, error) {
	if p.opts.Disabled {
		return nil, fmt.Errorf("cgroup: stats of %s: cgroup management is disabled: %w", name, ErrNotSupported)
	}
	mgr, err := p.manager()
	if err != nil {
		return nil, err
	}
	return mgr.Stats(name)
}

// UpdateQoS brings the QoS cgroups in step with the active pods (those
// admitted and not terminated), as the kubelet's UpdateCgroups: besteffort
// cpu.shares 2, burstable cpu.shares from the sum of the Burstable pods'
// cpu requests; with MemoryReservePercent, the memory limits of burstable
// and besteffort (when a limit is refused because the usage is above it,
// the limit is set to the usage, and written again); with MemoryQoS on
// cgroup v2, memory.min of the root and burstable cgroups (written even
// when it drops to 0, which the kubelet skips).
func (p *PodManager) UpdateQoS(activePods []*v1.Pod) error {
	if p.opts.Disabled {
		return nil
	}
	mgr, err := p.manager()
	if err != nil {
		return err
	}
	p.qosMu.Lock()
	defer p.qosMu.Unlock()

	sums := p.qos.sum(activePods)
	bShares, beShares := MilliCPUToShares(sums.burstableCPU), uint64(MinShares)
	configs := []struct {
		name string
		rc   *ResourceConfig
	}{
		{p.opts.Root, &ResourceConfig{}},
		{p.burstable(), &ResourceConfig{CPUShares: &bShares}},
		{p.besteffort(), &ResourceConfig{CPUShares: &beShares}},
	}
	if p.opts.MemoryQoS && mgr.Info().Mode == ModeUnified {
		bMin := sums.burstableMemory
		gMin := sums.guaranteedMemory + bMin
		configs[0].rc.MemoryMin, configs[1].rc.MemoryMin = &gMin, &bMin
	}
	if pct := p.opts.MemoryReservePercent; pct > 0 {
		a := p.allocatable()
		alloc := a.Memory().Value()
		bLimit := alloc - sums.guaranteedMemory*pct/100
		beLimit := bLimit - sums.burstableMemory*pct/100
		configs[1].rc.Memory, configs[2].rc.Memory = &bLimit, &beLimit
	}
	update := func() error {
		var errs []error
		for _, c := range configs {
			if err := mgr.Update(c.name, c.rc); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	want := qosWritten{bShares: bShares}
	for i, c := range configs {
		want.min[i], want.mem[i] = c.rc.MemoryMin, c.rc.Memory
	}
	if p.qos.written != nil && p.qos.written.equal(want) {
		// The same values as the last time, written whole: admitting a
		// BestEffort pod, or one whose requests another's removal offsets,
		// writes nothing.
		return nil
	}
	p.qos.written = nil
	err = update()
	if err == nil {
		p.qos.written = &want
	}
	if err != nil && p.opts.MemoryReservePercent > 0 {
		p.log.V(1).Info("retrying QoS memory limits at the usage", "cause", err.Error())
		for _, c := range configs[1:] {
			st, serr := mgr.Stats(c.name)
			if serr == nil && c.rc.Memory != nil && int64(st.MemoryUsage) > *c.rc.Memory {
				u := int64(st.MemoryUsage)
				c.rc.Memory = &u
			}
		}
		err = update()
	}
	if err != nil {
		return err
	}
	p.log.V(4).Info("updated QoS cgroups", "burstableShares", bShares)
	return nil
}

// DesiredPodConfig is the configuration EnsurePod gives the pod's cgroup
// (ResourceConfigForPod with the options applied): what a resize in place
// moves the cgroup to. Nil when the PodManager is disabled or the
// hierarchy cannot be set up.
func (p *PodManager) DesiredPodConfig(pod *v1.Pod) *ResourceConfig {
	if p.opts.Disabled {
		return nil
	}
	mgr, err := p.manager()
	if err != nil {
		return nil
	}
	return p.podConfig(pod, mgr.Info())
}

// PodConfig reads the pod's cgroup: its configuration and its memory
// usage in bytes. A pod without a cgroup gives an error matching
// ErrNotFound.
func (p *PodManager) PodConfig(pod *v1.Pod) (*ResourceConfig, uint64, error) {
	if p.opts.Disabled {
		return nil, 0, fmt.Errorf("cgroup: pod cgroups are disabled: %w", ErrNotFound)
	}
	if err := checkUID(pod.UID); err != nil {
		return nil, 0, err
	}
	mgr, err := p.manager()
	if err != nil {
		return nil, 0, err
	}
	name := p.CgroupName(pod)
	rc, err := mgr.Config(name)
	if err != nil {
		return nil, 0, err
	}
	st, err := mgr.Stats(name)
	if err != nil {
		return nil, 0, err
	}
	return rc, st.MemoryUsage, nil
}

// SetPodConfig writes the set fields of rc to the pod's existing cgroup,
// leaving the others: one step of a resize in place, which changes the
// pod's limits and its containers' in the kubelet's order.
func (p *PodManager) SetPodConfig(pod *v1.Pod, rc *ResourceConfig) error {
	if p.opts.Disabled {
		return nil
	}
	if err := checkUID(pod.UID); err != nil {
		return err
	}
	mgr, err := p.manager()
	if err != nil {
		return err
	}
	return mgr.Update(p.CgroupName(pod), rc)
}

// qosTally keeps, between UpdateQoS calls, the QoS class and requests of
// each active pod and their sums. A pod's spec never changes under the
// same *v1.Pod (an update brings a new object), and the agent admits pods
// by appending them to the active pods: when the active pods start with
// those of the last call, only the pods after them are counted. A batch of
// pods admitted one at a time then computes each pod's requests once, and
// each call costs pointer comparisons with the last call's pods, rather
// than the requests of every active pod, which made admitting n pods one
// by one O(n²) request computations. Any other active pods are summed
// again from the requests kept of each pod. Used under qosMu.
type qosTally struct {
	last []*v1.Pod
	sums qosSums
	pods map[types.UID]*qosPod
	gen  uint64
	// written holds the values of the last update that wrote all of them
	// as they were computed (no retry at the usage); nil if none.
	written *qosWritten
}

// qosSums are the requests that size the QoS cgroups.
type qosSums struct {
	burstableCPU     int64 // millicores
	burstableMemory  int64
	guaranteedMemory int64
}

// qosPod is what a pod adds to the sums.
type qosPod struct {
	pod  *v1.Pod
	sums qosSums
	gen  uint64
}

// qosWritten are the values of an update of the three QoS cgroups: the
// burstable cgroup's cpu shares, and of each its memory.min and memory
// limit (nil when not set).
type qosWritten struct {
	bShares  uint64
	min, mem [3]*int64
}

func (w *qosWritten) equal(o qosWritten) bool {
	eq := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	if w.bShares != o.bShares {
		return false
	}
	for i := range w.min {
		if !eq(w.min[i], o.min[i]) || !eq(w.mem[i], o.mem[i]) {
			return false
		}
	}
	return true
}

func (s *qosSums) add(o qosSums) {
	s.burstableCPU += o.burstableCPU
	s.burstableMemory += o.burstableMemory
	s.guaranteedMemory += o.guaranteedMemory
}

// sum returns the sums of the requests of the active pods.
func (t *qosTally) sum(active []*v1.Pod) qosSums {
	if t.pods == nil {
		t.pods = make(map[types.UID]*qosPod)
	}
	from := 0
	if extendsPods(active, t.last) {
		from = len(t.last)
	} else {
		clear(t.last)
		t.last = t.last[:0]
		t.sums = qosSums{}
		t.gen++
	}
	for _, pod := range active[from:] {
		e := t.pods[pod.UID]
		if e == nil || e.pod != pod {
			e = &qosPod{pod: pod, sums: qosRequests(pod)}
			t.pods[pod.UID] = e
		}
		e.gen = t.gen
		t.sums.add(e.sums)
	}
	if from == 0 {
		for uid, e := range t.pods {
			if e.gen != t.gen {
				delete(t.pods, uid)
			}
		}
	}
	t.last = append(t.last, active[from:]...)
	return t.sums
}

// qosRequests is what the pod adds to the sums: a Burstable pod's cpu
// request, and the memory requests of Burstable and Guaranteed pods.
func qosRequests(pod *v1.Pod) qosSums {
	var s qosSums
	qos := podmodel.QOSClass(pod)
	if qos == v1.PodQOSBestEffort {
		return s
	}
	reqs := podmodel.Requests(pod)
	mem, hasMem := reqs[v1.ResourceMemory]
	switch qos {
	case v1.PodQOSBurstable:
		if q, ok := reqs[v1.ResourceCPU]; ok {
			s.burstableCPU = q.MilliValue()
		}
		if hasMem {
			s.burstableMemory = mem.Value()
		}
	case v1.PodQOSGuaranteed:
		if hasMem {
			s.guaranteedMemory = mem.Value()
		}
	}
	return s
}

// extendsPods reports whether active starts with the pods of last (the
// same objects, in order).
func extendsPods(active, last []*v1.Pod) bool {
	if len(last) == 0 || len(active) < len(last) {
		return false
	}
	for i, pod := range last {
		if active[i] != pod {
			return false
		}
	}
	return true
}
