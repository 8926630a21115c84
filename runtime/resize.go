package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// ActionResizePod is the step of a sync that resizes a pod in place: its
// cgroup and its running containers (UpdateContainerResources).
const ActionResizePod SyncAction = "ResizePodInPlace"

// ErrResizePodInPlace: a resize in place failed (the pod cgroup could not
// be read or written, the new memory limit is below the pod's usage, or
// the runtime refused UpdateContainerResources). The sync retries it.
var ErrResizePodInPlace = errors.New("runtime: ResizePodInPlaceError")

// The kubelet's smallest effective CPU values: requests of at most
// minShares millicores all give 2 shares, limits of at most
// minMilliCPULimit all give the minimum quota.
const (
	minShares        = 2
	minMilliCPULimit = 10
)

// ContainerResources are a running container's resources as the runtime
// reports them (CRI ContainerStatus.resources.linux): nil where it
// reports none.
type ContainerResources struct {
	// CPURequest from the CPU shares.
	CPURequest *resource.Quantity
	// CPULimit from the CFS quota and period.
	CPULimit *resource.Quantity
	// MemoryLimit in bytes.
	MemoryLimit *resource.Quantity
}

// containerResourcesFromCRI converts the runtime's report as the kubelet
// does: shares to millicores rounded up, quota/period to millicores, no
// value for an unset or unlimited field.
func containerResourcesFromCRI(r *runtimeapi.ContainerResources) *ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	out := &ContainerResources{}
	if l.GetCpuPeriod() > 0 && l.GetCpuQuota() > 0 {
		if m := l.GetCpuQuota() * 1000 / l.GetCpuPeriod(); m > 0 {
			out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if s := l.GetCpuShares(); s >= minShares {
		m := int64(math.Ceil(float64(s*1000) / 1024))
		out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if b := l.GetMemoryLimitInBytes(); b > 0 {
		out.MemoryLimit = resource.NewQuantity(b, resource.BinarySI)
	}
	return out
}

// containerResourceValues are a container's cpu and memory in the units a
// resize compares: millicores and bytes.
type containerResourceValues struct {
	memoryLimit   int64
	memoryRequest int64
	cpuLimit      int64
	cpuRequest    int64
}

// desiredValues are the container's values as its spec (the allocated
// resources) gives them; a CPU limit without request requests the limit,
// as the container was created.
func desiredValues(c *v1.Container) containerResourceValues {
	d := containerResourceValues{
		memoryLimit:   c.Resources.Limits.Memory().Value(),
		memoryRequest: c.Resources.Requests.Memory().Value(),
		cpuLimit:      c.Resources.Limits.Cpu().MilliValue(),
		cpuRequest:    c.Resources.Requests.Cpu().MilliValue(),
	}
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok && d.cpuLimit != 0 {
		d.cpuRequest = d.cpuLimit
	}
	return d
}

// actualValues are the values the runtime reports; the memory request,
// which no cgroup holds, is taken from desired.
func actualValues(r *ContainerResources, desired containerResourceValues) containerResourceValues {
	a := containerResourceValues{memoryRequest: desired.memoryRequest}
	if r.MemoryLimit != nil {
		a.memoryLimit = r.MemoryLimit.Value()
	}
	if r.CPULimit != nil {
		a.cpuLimit = r.CPULimit.MilliValue()
	}
	if r.CPURequest != nil {
		a.cpuRequest = r.CPURequest.MilliValue()
	}
	return a
}

// sameEffective makes the desired values equal the actual ones where the
// difference has no effect: both requests at or below the minimum shares,
// both limits at or below the minimum quota.
func sameEffective(desired, actual containerResourceValues) containerResourceValues {
	if desired.cpuRequest <= minShares && actual.cpuRequest <= minShares {
		desired.cpuRequest = actual.cpuRequest
	}
	if desired.cpuLimit <= minMilliCPULimit && actual.cpuLimit <= minMilliCPULimit {
		desired.cpuLimit = actual.cpuLimit
	}
	return desired
}

// ContainerResized reports whether a running container's resources, as the
// runtime reports them, differ from its spec's (the allocated resources):
// its resize is not done. A container whose runtime reports no resources
// counts as done, there being nothing to compare.
func ContainerResized(c *v1.Container, cs *ContainerStatus) bool {
	if cs == nil || cs.State != ContainerStateRunning || cs.Resources == nil {
		return false
	}
	desired := desiredValues(c)
	actual := actualValues(cs.Resources, desired)
	return sameEffective(desired, actual) != actual
}

// containerToUpdate is one running container whose resources change in
// place.
type containerToUpdate struct {
	ID        string
	Container *v1.Container
	// Desired are the allocated values; Current what the runtime has,
	// shared by the container's updates of both resources and advanced as
	// each succeeds (an update sends the other resource's current value).
	Desired containerResourceValues
	Current *containerResourceValues
}

// computePodResizeAction decides what a running app container's resize
// needs, as the kubelet's function of the same name: nothing when its
// runtime resources match the spec (or the runtime reports none); a
// restart (kill and start, reported as keep false) when a changed
// resource's resizePolicy is RestartContainer; else an in-place update,
// per resource, decreases ordered before increases.
func computePodResizeAction(pod *v1.Pod, idx int, cs *ContainerStatus, a *podActions) (keep bool) {
	if computeContainerResizeAction(&pod.Spec.Containers[idx], cs, a) {
		a.ContainersToStart = append(a.ContainersToStart, idx)
		return false
	}
	return true
}

// computeContainerResizeAction is computePodResizeAction for one running
// container, app or init (a restartable init container, a sidecar, is
// resized as an app container is): it adds the in-place updates to a, or,
// when a changed resource's resizePolicy is RestartContainer, the kill
// and reports restart, the caller adding the start to the list of the
// container's kind.
func computeContainerResizeAction(c *v1.Container, cs *ContainerStatus, a *podActions) (restart bool) {
	if cs.State != ContainerStateRunning || cs.Resources == nil {
		return false
	}
	desired := desiredValues(c)
	current := actualValues(cs.Resources, desired)
	desired = sameEffective(desired, current)
	if desired == current {
		return false
	}
	policy := func(name v1.ResourceName, want, have int64) (resize, restart bool) {
		if want == have {
			return false, false
		}
		for _, p := range c.ResizePolicy {
			if p.ResourceName == name {
				return true, p.RestartPolicy == v1.RestartContainer
			}
		}
		return true, false // NotRequired by default
	}
	resizeMem, restartMem := policy(v1.ResourceMemory, desired.memoryLimit, current.memoryLimit)
	resizeCPULim, restartCPULim := policy(v1.ResourceCPU, desired.cpuLimit, current.cpuLimit)
	resizeCPUReq, restartCPUReq := policy(v1.ResourceCPU, desired.cpuRequest, current.cpuRequest)
	if restartMem || restartCPULim || restartCPUReq {
		a.ContainersToKill = append(a.ContainersToKill, containerToKill{
			ID: cs.ID, Name: cs.Name, Container: c, Reason: killResize,
			Message: fmt.Sprintf("Container %s resize requires restart", c.Name),
		})
		a.UpdatePodResources = true
		return true
	}
	shared := &current
	mark := func(name v1.ResourceName, want, have int64) {
		u := containerToUpdate{ID: cs.ID, Container: c, Desired: desired, Current: shared}
		if a.ContainersToUpdate == nil {
			a.ContainersToUpdate = map[v1.ResourceName][]containerToUpdate{}
		}
		list := a.ContainersToUpdate[name]
		if want < have {
			list = append([]containerToUpdate{u}, list...)
		} else {
			list = append(list, u)
		}
		a.ContainersToUpdate[name] = list
	}
	if resizeMem {
		mark(v1.ResourceMemory, desired.memoryLimit, current.memoryLimit)
	}
	if resizeCPULim {
		mark(v1.ResourceCPU, desired.cpuLimit, current.cpuLimit)
	} else if resizeCPUReq {
		mark(v1.ResourceCPU, desired.cpuRequest, current.cpuRequest)
	}
	return false
}

// PodCgroupConfig is the part of a pod cgroup's configuration a resize
// changes; nil fields are not set (or, read, not known). CPUQuota and
// Memory are -1 for no limit.
type PodCgroupConfig struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
}

// PodCgroup is the pod-level cgroup a resize in place changes. The
// agent's adapter over cgroup.PodManager implements it.
type PodCgroup interface {
	// Current reads the pod cgroup's configuration and its memory usage
	// in bytes.
	Current(pod *v1.Pod) (PodCgroupConfig, uint64, error)
	// Desired is the configuration the pod's resources give its cgroup
	// (the kubelet's ResourceConfigForPod).
	Desired(pod *v1.Pod) PodCgroupConfig
	// Set writes the non-nil fields.
	Set(pod *v1.Pod, cfg PodCgroupConfig) error
}

// doPodResizeAction resizes the pod in place, as the kubelet's function
// of the same name: memory, then CPU, each in the order that keeps the
// pod cgroup at or above its containers (an increase: the pod cgroup's
// limit first, then the containers; a decrease: the containers first,
// then the pod cgroup). It stops at the first failure; the next sync
// starts over from what the runtime then reports.
func (m *Manager) doPodResizeAction(ctx context.Context, pod *v1.Pod, a podActions, pc PodCgroup) error {
	if pc == nil {
		// No pod cgroup to change (cgroups disabled): the containers only.
		for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
			if err := m.updatePodContainerResources(ctx, pod, name, a.ContainersToUpdate[name]); err != nil {
				return err
			}
		}
		return nil
	}
	want := pc.Desired(pod)
	setPod := func(name v1.ResourceName, limit bool) error {
		var cfg PodCgroupConfig
		switch {
		case name == v1.ResourceCPU && limit:
			cfg.CPUQuota, cfg.CPUPeriod = want.CPUQuota, want.CPUPeriod
		case name == v1.ResourceCPU:
			cfg.CPUShares = want.CPUShares
		case limit:
			cfg.Memory = want.Memory
		default:
			return nil // memory requests are not written to cgroups
		}
		if err := pc.Set(pod, cfg); err != nil {
			return fmt.Errorf("%w: set pod cgroup %s: %w", ErrResizePodInPlace, name, err)
		}
		return nil
	}
	resize := func(name v1.ResourceName, curLim, newLim, curReq, newReq int64) error {
		if newLim > curLim {
			if err := setPod(name, true); err != nil {
				return err
			}
		}
		if newReq > curReq {
			if err := setPod(name, false); err != nil {
				return err
			}
		}
		if err := m.updatePodContainerResources(ctx, pod, name, a.ContainersToUpdate[name]); err != nil {
			return err
		}
		if newReq < curReq {
			if err := setPod(name, false); err != nil {
				return err
			}
		}
		if newLim < curLim {
			return setPod(name, true)
		}
		return nil
	}
	if len(a.ContainersToUpdate[v1.ResourceMemory]) > 0 || a.UpdatePodResources {
		cur, usage, err := pc.Current(pod)
		if err != nil {
			return fmt.Errorf("%w: read pod cgroup: %w", ErrResizePodInPlace, err)
		}
		if want.Memory != nil && *want.Memory > 0 && usage >= uint64(*want.Memory) {
			return fmt.Errorf("%w: aborting attempt to set pod memory limit less than current memory usage for pod %s", ErrResizePodInPlace, pod.Name)
		}
		if want.Memory == nil {
			want.Memory = cur.Memory
		}
		if err := resize(v1.ResourceMemory, limitValue(cur.Memory), limitValue(want.Memory), 0, 0); err != nil {
			return err
		}
	}
	if len(a.ContainersToUpdate[v1.ResourceCPU]) > 0 || a.UpdatePodResources {
		cur, _, err := pc.Current(pod)
		if err != nil {
			return fmt.Errorf("%w: read pod cgroup: %w", ErrResizePodInPlace, err)
		}
		if want.CPUQuota == nil {
			want.CPUQuota, want.CPUPeriod = cur.CPUQuota, cur.CPUPeriod
		}
		if want.CPUShares == nil {
			want.CPUShares = cur.CPUShares
		}
		if err := resize(v1.ResourceCPU, limitValue(cur.CPUQuota), limitValue(want.CPUQuota),
			int64(uintValue(cur.CPUShares)), int64(uintValue(want.CPUShares))); err != nil {
			return err
		}
	}
	return nil
}

// limitValue orders limits: no limit (-1 or unknown) above any value.
func limitValue(p *int64) int64 {
	if p == nil || *p < 0 {
		return math.MaxInt64
	}
	return *p
}

func uintValue(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// updatePodContainerResources sends each container its new values of one
// resource with the current values of the other (the kubelet's order and
// mix), stopping at the first failure.
func (m *Manager) updatePodContainerResources(ctx context.Context, pod *v1.Pod, name v1.ResourceName, list []containerToUpdate) error {
	for _, u := range list {
		c := u.Container.DeepCopy()
		cpuLim, cpuReq, memLim, memReq := u.Current.cpuLimit, u.Current.cpuRequest, u.Desired.memoryLimit, u.Desired.memoryRequest
		if name == v1.ResourceCPU {
			cpuLim, cpuReq, memLim, memReq = u.Desired.cpuLimit, u.Desired.cpuRequest, u.Current.memoryLimit, u.Current.memoryRequest
		}
		c.Resources.Limits = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpuLim, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(memLim, resource.BinarySI),
		}
		c.Resources.Requests = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpuReq, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(memReq, resource.BinarySI),
		}
		res := &runtimeapi.ContainerResources{Linux: linuxResources(c, m.opts.CPUCFSQuotaPeriod.Microseconds())}
		if err := m.rs.UpdateContainerResources(ctx, u.ID, res); err != nil {
			return fmt.Errorf("%w: update resources of container %s: %w", ErrResizePodInPlace, c.Name, err)
		}
		if name == v1.ResourceCPU {
			u.Current.cpuLimit, u.Current.cpuRequest = u.Desired.cpuLimit, u.Desired.cpuRequest
		} else {
			u.Current.memoryLimit, u.Current.memoryRequest = u.Desired.memoryLimit, u.Desired.memoryRequest
		}
		m.log.V(1).Info("resized container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", u.ID, "resource", name)
	}
	return nil
}

// ResizeAllowed reports whether the pod may be resized in place: not a
// static pod (the kubelet's IsInPlacePodVerticalScalingAllowed).
func ResizeAllowed(pod *v1.Pod) bool { return !podmodel.IsStatic(pod) }

// ResizeError is the message of the pod's last failed resize in place,
// until one succeeds or Forget; the PodResizeInProgress condition shows it
// with reason Error.
func (m *Manager) ResizeError(uid types.UID) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, ok := m.resizeErrors[uid]
	return msg, ok
}

func (m *Manager) recordResize(uid types.UID, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.resizeErrors, uid)
		return
	}
	m.resizeErrors[uid] = err.Error()
}
