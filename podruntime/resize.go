package podruntime

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/resizecmp"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// ActionResizePod is the step of a sync that resizes a pod in place: its
// cgroup and its running containers (UpdateContainerResources).
const ActionResizePod SyncAction = "ResizePodInPlace"

// ErrResizePodInPlace: a resize in place failed (the pod cgroup could not
// be read or written, the new memory limit is below the pod's usage, or
// the runtime refused UpdateContainerResources). The sync retries it.
var ErrResizePodInPlace = errors.New("runtime: ResizePodInPlaceError")

// containerToUpdate is one running container whose resources change in
// place.
type containerToUpdate struct {
	ID        string
	Container *v1.Container
	// Desired are the allocated values; Current what the runtime has,
	// shared by the container's updates of both resources and advanced as
	// each succeeds (an update sends the other resource's current value).
	Desired resizecmp.Values
	Current *resizecmp.Values
}

// computePodResizeAction decides what a running app container's resize
// needs, as the kubelet's function of the same name: nothing when its
// runtime resources match the spec (or the runtime reports none); a
// restart (kill and start, reported as keep false) when a changed
// resource's resizePolicy is RestartContainer; else an in-place update,
// per resource, decreases ordered before increases.
func computePodResizeAction(pod *v1.Pod, idx int, cs *runtime.ContainerStatus, a *podActions) (keep bool) {
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
func computeContainerResizeAction(c *v1.Container, cs *runtime.ContainerStatus, a *podActions) (restart bool) {
	if cs.State != runtime.ContainerStateRunning || cs.Resources == nil {
		return false
	}
	desired := resizecmp.Desired(c)
	current := resizecmp.Actual(cs.Resources.CPURequest, cs.Resources.CPULimit, cs.Resources.MemoryLimit, desired)
	desired = resizecmp.SameEffective(desired, current)
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
	resizeMem, restartMem := policy(v1.ResourceMemory, desired.MemoryLimit, current.MemoryLimit)
	resizeCPULim, restartCPULim := policy(v1.ResourceCPU, desired.CPULimit, current.CPULimit)
	resizeCPUReq, restartCPUReq := policy(v1.ResourceCPU, desired.CPURequest, current.CPURequest)
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
		mark(v1.ResourceMemory, desired.MemoryLimit, current.MemoryLimit)
	}
	if resizeCPULim {
		mark(v1.ResourceCPU, desired.CPULimit, current.CPULimit)
	} else if resizeCPUReq {
		mark(v1.ResourceCPU, desired.CPURequest, current.CPURequest)
	}
	return false
}

// PodCgroup is the pod-level cgroup a resize in place changes. The
// agent's adapter over cgroup.PodManager implements it.
type PodCgroup interface {
	// Current reads the pod cgroup's configuration and its memory usage
	// in bytes.
	Current(pod *v1.Pod) (runtime.PodCgroupConfig, uint64, error)
	// Desired is the configuration the pod's resources give its cgroup
	// (the kubelet's ResourceConfigForPod).
	Desired(pod *v1.Pod) runtime.PodCgroupConfig
	// Set writes the non-nil fields.
	Set(pod *v1.Pod, cfg runtime.PodCgroupConfig) error
}

// doPodResizeAction resizes the pod in place, as the kubelet's function
// of the same name: memory, then CPU, each in the order that keeps the
// pod cgroup at or above its containers (an increase: the pod cgroup's
// limit first, then the containers; a decrease: the containers first,
// then the pod cgroup). It stops at the first failure; the next sync
// starts over from what the runtime then reports.
func (m *Manager) doPodResizeAction(ctx context.Context, pod *v1.Pod, a podActions, pc PodCgroup, cfsPeriodUS int64) error {
	if pc == nil {
		// No pod cgroup to change (cgroups disabled): the containers only.
		for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
			if err := m.updatePodContainerResources(ctx, pod, name, a.ContainersToUpdate[name], cfsPeriodUS); err != nil {
				return err
			}
		}
		return nil
	}
	want := pc.Desired(pod)
	setPod := func(name v1.ResourceName, limit bool) error {
		var cfg runtime.PodCgroupConfig
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
		if err := m.updatePodContainerResources(ctx, pod, name, a.ContainersToUpdate[name], cfsPeriodUS); err != nil {
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
		if err := resize(v1.ResourceMemory, resizecmp.LimitValue(cur.Memory), resizecmp.LimitValue(want.Memory), 0, 0); err != nil {
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
		if err := resize(v1.ResourceCPU, resizecmp.LimitValue(cur.CPUQuota), resizecmp.LimitValue(want.CPUQuota),
			int64(uintValue(cur.CPUShares)), int64(uintValue(want.CPUShares))); err != nil {
			return err
		}
	}
	return nil
}

// podCgroupResizeNeeded reports whether the pod has pod-level resources
// (spec.resources, as allocated) that its cgroup does not have yet: a
// resize of the pod-level resources (InPlacePodLevelResourcesVerticalScaling)
// not yet actuated. A pod cgroup that cannot be read has nothing to resize
// now; the next sync reads it again.
func podCgroupResizeNeeded(pod *v1.Pod, pc PodCgroup) bool {
	if pc == nil || !podmodel.HasPodLevelResources(pod) {
		return false
	}
	cur, _, err := pc.Current(pod)
	if err != nil {
		return false
	}
	return runtime.PodCgroupResized(cur, pc.Desired(pod))
}

// updatePodContainerResources sends each container its new values of one
// resource with the current values of the other (the kubelet's order and
// mix), stopping at the first failure.
func (m *Manager) updatePodContainerResources(ctx context.Context, pod *v1.Pod, name v1.ResourceName, list []containerToUpdate, cfsPeriodUS int64) error {
	for _, u := range list {
		c := u.Container.DeepCopy()
		cpuLim, cpuReq, memLim, memReq := u.Current.CPULimit, u.Current.CPURequest, u.Desired.MemoryLimit, u.Desired.MemoryRequest
		if name == v1.ResourceCPU {
			cpuLim, cpuReq, memLim, memReq = u.Desired.CPULimit, u.Desired.CPURequest, u.Current.MemoryLimit, u.Current.MemoryRequest
		}
		c.Resources.Limits = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpuLim, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(memLim, resource.BinarySI),
		}
		c.Resources.Requests = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpuReq, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(memReq, resource.BinarySI),
		}
		res := &runtimeapi.ContainerResources{Linux: linuxResources(c, cfsPeriodUS)}
		if err := m.rs.UpdateContainerResources(ctx, u.ID, res); err != nil {
			return fmt.Errorf("%w: update resources of container %s: %w", ErrResizePodInPlace, c.Name, err)
		}
		if name == v1.ResourceCPU {
			u.Current.CPULimit, u.Current.CPURequest = u.Desired.CPULimit, u.Desired.CPURequest
		} else {
			u.Current.MemoryLimit, u.Current.MemoryRequest = u.Desired.MemoryLimit, u.Desired.MemoryRequest
		}
		m.log.V(1).Info("resized container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", u.ID, "resource", name)
	}
	return nil
}

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

func uintValue(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
