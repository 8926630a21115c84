package nodekit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
)

// allocationCheckpointFile is where the agent keeps the resources
// allocated to its pods, below its RootDir (the kubelet's
// allocated_pods_state checkpoint).
const allocationCheckpointFile = "checkpoints/allocated-pods.json"

// The kubelet's events of a resize.
const (
	eventResizeStarted    = "ResizeStarted"
	eventResizeDeferred   = "ResizeDeferred"
	eventResizeInfeasible = "ResizeInfeasible"
)

// PodResizes tell the pod sync the PodResizePending condition of a pod
// whose resize is not allocated.
type PodResizes interface {
	PendingResize(uid types.UID) *v1.PodCondition
}

// resizes is the agent's allocation manager: the resources allocated to
// each admitted pod, kept in a checkpoint so that a restarted agent runs
// its pods with the resources it allocated (not whatever their spec asks
// for now), and the pods' pending resizes. The pod workers run the pods
// as allocated (podmodel.WithAllocation); a pod whose spec asks for other
// resources is resized when podmodel.DecideResize allows it. It is safe
// for concurrent use: one mutex orders the decisions, so two resizes
// never both take the last free resources.
type resizes struct {
	path string // "" keeps the allocations in memory only
	log  logr.Logger
	// known reports whether a pod UID is still the agent's; allocations
	// of others are dropped when the checkpoint is written.
	known func(types.UID) bool
	// active returns the admitted pods that may still run.
	active func() []*v1.Pod
	// allocatable is the node's allocatable cpu and memory.
	allocatable func() v1.ResourceList
	event       func(pod *v1.Pod, eventtype, reason, message string)

	mu      sync.Mutex
	loaded  bool
	alloc   map[types.UID]podmodel.Allocation
	pending map[types.UID]v1.PodCondition
	// dirty: allocations made at admission are not in the checkpoint
	// yet; the next sync writes them (a pod admitted but never synced
	// has run nothing, and is admitted again after a restart).
	dirty bool
	// asAllocated holds each pod as allocated (podmodel.WithAllocation),
	// by pod object, until its allocation changes: admission sees every
	// active pod as allocated at every admission, and the same objects
	// let the admission checks add only the pods admitted since.
	asAllocated map[types.UID]allocatedPod
}

// allocatedPod is a pod as allocated: out is pod with its allocation.
type allocatedPod struct {
	pod, out *v1.Pod
	changed  bool
}

// allocationCheckpoint is the checkpoint file's content.
type allocationCheckpoint struct {
	Version int                               `json:"version"`
	Pods    map[types.UID]podmodel.Allocation `json:"pods"`
}

// loadLocked reads the checkpoint once. A missing file is an empty one; an
// unreadable one is logged and replaced at the next write (its pods are
// allocated what their spec asks for, as at their first admission).
func (r *resizes) loadLocked() {
	if r.loaded {
		return
	}
	r.loaded = true
	r.alloc = map[types.UID]podmodel.Allocation{}
	r.pending = map[types.UID]v1.PodCondition{}
	if r.path == "" {
		return
	}
	data, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var cp allocationCheckpoint
	if err == nil {
		err = json.Unmarshal(data, &cp)
	}
	if err == nil && cp.Version != 1 {
		err = fmt.Errorf("unknown version %d", cp.Version)
	}
	if err != nil {
		r.log.Error(err, "Ignoring the unreadable allocation checkpoint", "path", r.path)
		return
	}
	for uid, a := range cp.Pods {
		r.alloc[uid] = a
	}
}

// storeLocked writes the checkpoint (a temporary file renamed over it),
// keeping the pods the agent still knows.
func (r *resizes) storeLocked() {
	if r.path == "" {
		return
	}
	r.dirty = false
	for uid := range r.alloc {
		if r.known != nil && !r.known(uid) {
			delete(r.alloc, uid)
			delete(r.pending, uid)
			delete(r.asAllocated, uid)
		}
	}
	for uid := range r.asAllocated {
		if r.known != nil && !r.known(uid) {
			delete(r.asAllocated, uid)
		}
	}
	data, err := json.Marshal(allocationCheckpoint{Version: 1, Pods: r.alloc})
	if err == nil {
		err = os.MkdirAll(filepath.Dir(r.path), 0o700)
	}
	if err == nil {
		tmp := r.path + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, r.path)
		}
	}
	if err != nil {
		r.log.Error(err, "Writing the allocation checkpoint", "path", r.path)
	}
}

// allocated is the pod as allocated, and whether its spec asks for other
// resources.
func (r *resizes) allocated(pod *v1.Pod) (*v1.Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	if a, ok := r.asAllocated[pod.UID]; ok && a.pod == pod {
		return a.out, a.changed
	}
	out, changed := podmodel.WithAllocation(pod, r.alloc[pod.UID])
	if r.asAllocated == nil {
		r.asAllocated = map[types.UID]allocatedPod{}
	}
	r.asAllocated[pod.UID] = allocatedPod{pod: pod, out: out, changed: changed}
	return out, changed
}

// setAllocLocked records the pod's allocation.
func (r *resizes) setAllocLocked(uid types.UID, a podmodel.Allocation) {
	r.alloc[uid] = a
	delete(r.asAllocated, uid)
}

// admit wraps the admission checks: they see the pod and the active pods
// as allocated (a restarted agent admits its pods with the resources it
// allocated them), and an admitted pod is allocated what it was admitted
// with, as the kubelet's allocation manager does.
func (r *resizes) admit(hs []admission.Handler) admission.Handler {
	chain := admission.Chain(hs...)
	return admission.Func(func(pod *v1.Pod, active []*v1.Pod) admission.Result {
		pod, _ = r.allocated(pod)
		others := make([]*v1.Pod, len(active))
		for i, p := range active {
			others[i], _ = r.allocated(p)
		}
		res := chain.Admit(pod, others)
		if res.Admit {
			r.mu.Lock()
			if _, ok := r.alloc[pod.UID]; !ok {
				r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
				r.dirty = true
			}
			r.mu.Unlock()
		}
		return res
	})
}

// resolve decides the pod's resize, if its spec asks for one, and returns
// the pod as allocated afterwards: the kubelet's handlePodResourcesResize.
func (r *resizes) resolve(pod *v1.Pod) *v1.Pod {
	// The other pods are listed (outside the lock: the list takes the
	// pod manager's) only for a pod that asks for a resize.
	if _, asks := r.allocated(pod); !asks {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.alloc[pod.UID]; ok {
			delete(r.pending, pod.UID)
			if r.dirty {
				r.storeLocked()
			}
			return pod
		}
		r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
		delete(r.pending, pod.UID)
		r.storeLocked()
		return pod
	}
	var others []*v1.Pod
	if r.active != nil {
		for _, p := range r.active() {
			if p.UID != pod.UID {
				others = append(others, p)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	alloc, ok := r.alloc[pod.UID]
	if !ok {
		// Admitted before the checkpoint knew it (or by another path):
		// allocated as asked.
		r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
		delete(r.pending, pod.UID)
		r.storeLocked()
		return pod
	}
	allocated, changed := podmodel.WithAllocation(pod, alloc)
	if !changed {
		delete(r.pending, pod.UID)
		return pod
	}
	for i, p := range others {
		others[i], _ = podmodel.WithAllocation(p, r.alloc[p.UID])
	}
	var allocatable v1.ResourceList
	if r.allocatable != nil {
		allocatable = r.allocatable()
	}
	reason, msg := podmodel.DecideResize(pod, allocated, others, allocatable)
	if reason == "" {
		r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
		delete(r.pending, pod.UID)
		r.storeLocked()
		r.log.V(1).Info("Pod resize allocated", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		r.emit(pod, v1.EventTypeNormal, eventResizeStarted, "Pod resize started")
		return pod
	}
	prev, had := r.pending[pod.UID]
	cond := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
	r.pending[pod.UID] = cond
	if !had || prev.Reason != reason || prev.Message != msg {
		r.log.Info("Pod resize pending", "pod", podmodel.FullName(pod), "podUID", pod.UID, "reason", reason, "message", msg)
		evt := eventResizeDeferred
		if reason == v1.PodReasonInfeasible {
			evt = eventResizeInfeasible
		}
		r.emit(pod, v1.EventTypeWarning, evt, "Pod resize "+reason+": "+msg)
	}
	return allocated
}

func (r *resizes) emit(pod *v1.Pod, eventtype, reason, message string) {
	if r.event != nil {
		r.event(pod, eventtype, reason, message)
	}
}

// PendingResize implements PodResizes.
func (r *resizes) PendingResize(uid types.UID) *v1.PodCondition {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.pending[uid]
	if !ok {
		return nil
	}
	return &c
}

// wrap makes the pod workers' sync run each pod as allocated, deciding
// its resize first.
func (r *resizes) wrap(s podworker.SyncFuncs) podworker.SyncFuncs {
	return resizingSyncFuncs{SyncFuncs: s, r: r}
}

type resizingSyncFuncs struct {
	podworker.SyncFuncs
	r *resizes
}

func (s resizingSyncFuncs) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error) {
	return s.SyncFuncs.SyncPod(ctx, updateType, s.r.resolve(pod), podStatus)
}

func (s resizingSyncFuncs) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, edit func(*v1.PodStatus)) error {
	pod, _ = s.r.allocated(pod)
	return s.SyncFuncs.SyncTerminatingPod(ctx, pod, podStatus, gracePeriod, edit)
}

func (s resizingSyncFuncs) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error {
	pod, _ = s.r.allocated(pod)
	return s.SyncFuncs.SyncTerminatedPod(ctx, pod, podStatus)
}

// newResizes builds the agent's allocation manager.
func (a *Agent) newResizes() *resizes {
	r := &resizes{
		log:   a.log,
		known: func(uid types.UID) bool { _, ok := a.pods.GetPodByUID(uid); return ok },
		active: func() []*v1.Pod {
			if a.handler == nil {
				return nil
			}
			return a.handler.ActivePods()
		},
		allocatable: func() v1.ResourceList { return a.admissionNode().Status.Allocatable },
		event: func(pod *v1.Pod, eventtype, reason, message string) {
			a.recorder.Event(pod, eventtype, reason, message)
		},
	}
	if a.opts.RootDir != "" {
		r.path = filepath.Join(a.opts.RootDir, allocationCheckpointFile)
	}
	return r
}

// podCgroupResizer is the cgroup.PodManager as a resize in place sees the
// pod's cgroup (runtime.PodCgroup).
type podCgroupResizer interface {
	DesiredPodConfig(pod *v1.Pod) *cgroup.ResourceConfig
	PodConfig(pod *v1.Pod) (*cgroup.ResourceConfig, uint64, error)
	SetPodConfig(pod *v1.Pod, rc *cgroup.ResourceConfig) error
}

// podCgroupFor returns the pod cgroup a resize changes, nil when cgroups
// are off or the PodCgroups cannot resize.
func podCgroupFor(c PodCgroups) runtime.PodCgroup {
	if !c.Enabled() {
		return nil
	}
	r, ok := c.(podCgroupResizer)
	if !ok {
		return nil
	}
	return podCgroup{r}
}

type podCgroup struct{ r podCgroupResizer }

func toRuntimeConfig(rc *cgroup.ResourceConfig) runtime.PodCgroupConfig {
	if rc == nil {
		return runtime.PodCgroupConfig{}
	}
	return runtime.PodCgroupConfig{CPUShares: rc.CPUShares, CPUQuota: rc.CPUQuota, CPUPeriod: rc.CPUPeriod, Memory: rc.Memory}
}

func (p podCgroup) Current(pod *v1.Pod) (runtime.PodCgroupConfig, uint64, error) {
	rc, usage, err := p.r.PodConfig(pod)
	return toRuntimeConfig(rc), usage, err
}

func (p podCgroup) Desired(pod *v1.Pod) runtime.PodCgroupConfig {
	return toRuntimeConfig(p.r.DesiredPodConfig(pod))
}

func (p podCgroup) Set(pod *v1.Pod, cfg runtime.PodCgroupConfig) error {
	return p.r.SetPodConfig(pod, &cgroup.ResourceConfig{CPUShares: cfg.CPUShares, CPUQuota: cfg.CPUQuota, CPUPeriod: cfg.CPUPeriod, Memory: cfg.Memory})
}
