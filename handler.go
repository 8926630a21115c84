package nodekit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/mirror"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volume"
)

// handler is the default SyncHandler and the pod workers' SyncFuncs: the
// kubelet's pod handling, without the parts this agent has not got yet.
type handler struct {
	log      logr.Logger
	nodeName string
	pods     *podManager
	statuses *status.Manager
	runtime  *runtime.Manager
	volumes  *volume.Manager
	probes   *probe.Manager
	cgroups  *cgroup.PodManager
	events   EventRecorder
	mirrors  *mirror.Manager // nil for a standalone agent
	// hostIPs returns the node's addresses for pod statuses; nil when
	// unknown.
	hostIPs func() []string
	cache   pleg.Cache
	queue   *podworker.Queue
	workers *podworker.Workers
	admit   []AdmitHandler

	mu sync.Mutex
	// rejected holds the pods admission turned away; they are never handed
	// to a worker.
	rejected map[types.UID]bool
}

var (
	_ syncloop.SyncHandler = (*handler)(nil)
	_ podworker.SyncFuncs  = (*handler)(nil)
)

func (h *handler) isRejected(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rejected[uid]
}

// HandlePodAdditions admits the pods, oldest first, and starts them.
func (h *handler) HandlePodAdditions(_ context.Context, pods []*v1.Pod) {
	pods = h.pods.splitMirrors(pods, false)
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	// The active pods are computed once for the batch, and each admitted
	// pod joins them: admission stays linear in the number of pods.
	var active []*v1.Pod
	for i, pod := range pods {
		if i == 0 {
			active = h.activePods()
		}
		h.pods.addOrUpdate(pod)
		if !h.workers.IsPodTerminationRequested(pod.UID) && !status.IsTerminal(pod.Status.Phase) {
			if r := h.canAdmit(pod, active); !r.Admit {
				h.reject(pod, r)
				continue
			}
			active = append(active, pod)
		}
		h.volumes.AddPod(pod)
		h.probes.AddPod(pod)
		h.workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})
	}
}

// activePods are the admitted pods that may still run.
func (h *handler) activePods() []*v1.Pod {
	var active []*v1.Pod
	for _, p := range h.pods.pods() {
		if h.isRejected(p.UID) || h.workers.IsPodKnownTerminated(p.UID) {
			continue
		}
		if s, ok := h.statuses.GetPodStatus(p.UID); ok && status.IsTerminal(s.Phase) {
			continue
		}
		active = append(active, p)
	}
	return active
}

func (h *handler) canAdmit(pod *v1.Pod, active []*v1.Pod) AdmitResult {
	for _, a := range h.admit {
		if r := a.Admit(pod, active); !r.Admit {
			return r
		}
	}
	return AdmitResult{Admit: true}
}

func (h *handler) reject(pod *v1.Pod, r AdmitResult) {
	h.log.Info("Pod rejected", "pod", podmodel.FullName(pod), "podUID", pod.UID, "reason", r.Reason, "message", r.Message)
	h.mu.Lock()
	h.rejected[pod.UID] = true
	h.mu.Unlock()
	h.statuses.SetPodStatus(pod, v1.PodStatus{
		Phase:   v1.PodFailed,
		Reason:  r.Reason,
		Message: "Pod was rejected: " + r.Message,
	})
}

// HandlePodUpdates records the new pods and syncs them.
func (h *handler) HandlePodUpdates(_ context.Context, pods []*v1.Pod) {
	pods = h.pods.splitMirrors(pods, false)
	for _, pod := range pods {
		h.pods.addOrUpdate(pod)
		if h.isRejected(pod.UID) {
			continue
		}
		h.volumes.AddPod(pod)
		h.workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodUpdate, Pod: pod})
	}
}

// HandlePodRemoves forgets the pods and stops them.
func (h *handler) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	pods = h.pods.splitMirrors(pods, true)
	for _, pod := range pods {
		h.pods.remove(pod)
		if h.isRejected(pod.UID) {
			continue
		}
		h.probes.RemovePod(pod)
		h.workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodKill, Pod: pod})
	}
}

// HandlePodReconcile records pods whose status alone changed at their
// source; a pod its source says is terminal is synced so that it stops.
func (h *handler) HandlePodReconcile(_ context.Context, pods []*v1.Pod) {
	pods = h.pods.splitMirrors(pods, false)
	for _, pod := range pods {
		h.pods.addOrUpdate(pod)
		if !h.isRejected(pod.UID) && status.IsTerminal(pod.Status.Phase) {
			h.workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
		}
	}
}

// HandlePodSyncs syncs the pods.
func (h *handler) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		if h.isRejected(pod.UID) {
			continue
		}
		h.workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
	}
}

// HandlePodCleanups is housekeeping, run once every source is ready: stop
// workers of pods no source lists, stop containers of pods nobody knows
// (left by an earlier run of the agent), and remove the runtime objects and
// agent state of pods that are gone.
func (h *handler) HandlePodCleanups(ctx context.Context) error {
	desired := h.pods.pods()
	desiredUIDs := make(map[types.UID]bool, len(desired))
	for _, p := range desired {
		desiredUIDs[p.UID] = true
	}
	h.mu.Lock()
	for uid := range h.rejected {
		if !desiredUIDs[uid] {
			delete(h.rejected, uid)
		}
	}
	h.mu.Unlock()

	workers := h.workers.SyncKnownPods(desired)
	h.statuses.RemoveOrphans(desiredUIDs)
	h.probes.CleanupPods(desiredUIDs)

	all, err := h.runtime.GetPods(ctx, true)
	if err != nil {
		return fmt.Errorf("nodekit: housekeeping: listing runtime pods: %w", err)
	}
	// Pod directories go with the pods: those no source wants and that
	// have nothing left in the runtime.
	keep := maps.Clone(desiredUIDs)
	for _, rp := range all {
		keep[rp.ID] = true
	}
	var errs []error
	if err := h.volumes.CleanupOrphans(ctx, keep); err != nil {
		errs = append(errs, err)
	}
	if err := h.cleanupCgroups(ctx, keep, workers); err != nil {
		errs = append(errs, err)
	}
	if h.mirrors != nil {
		var static []*v1.Pod
		for _, p := range desired {
			if podmodel.IsStatic(p) && !h.isRejected(p.UID) {
				static = append(static, p)
			}
		}
		if err := h.mirrors.Sync(ctx, static); err != nil {
			errs = append(errs, err)
		}
	}
	for _, rp := range all {
		if _, known := workers[rp.ID]; known {
			continue
		}
		if desiredUIDs[rp.ID] && !h.isRejected(rp.ID) {
			// Its worker is about to start.
			continue
		}
		if hasRunning(rp) {
			h.log.V(1).Info("Stopping pod unknown to the agent", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
			h.workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp})
			continue
		}
		// Nothing runs and nobody wants it: remove what is left.
		if err := h.runtime.RemovePod(ctx, rp.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing pod %s: %w", rp.ID, err))
			continue
		}
		h.runtime.Forget(rp.ID)
		h.cache.Delete(rp.ID)
		h.log.V(1).Info("Removed pod from the runtime", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
	}
	return errors.Join(errs...)
}

// cleanupCgroups removes the cgroups of pods nobody wants, that have no
// worker and nothing in the runtime.
func (h *handler) cleanupCgroups(ctx context.Context, keep map[types.UID]bool, workers map[types.UID]podworker.PodWorkerSync) error {
	if !h.cgroups.Enabled() {
		return nil
	}
	uids, err := h.cgroups.Pods()
	if err != nil {
		return fmt.Errorf("nodekit: housekeeping: listing pod cgroups: %w", err)
	}
	var errs []error
	for _, uid := range uids {
		if _, known := workers[uid]; known || keep[uid] {
			continue
		}
		if err := h.cgroups.DestroyPod(ctx, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		h.log.V(1).Info("Removed orphaned pod cgroup", "podUID", uid)
	}
	return errors.Join(errs...)
}

func hasRunning(p *runtime.Pod) bool {
	for _, c := range p.Containers {
		if c.State == runtime.ContainerStateRunning {
			return true
		}
	}
	for _, s := range p.Sandboxes {
		if s.State == runtime.ContainerStateRunning {
			return true
		}
	}
	return false
}

// SyncPod implements podworker.SyncFuncs: report the status, then drive the
// runtime towards the pod's spec.
func (h *handler) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error) {
	apiStatus := h.setStatus(pod, podStatus, false, nil)
	if status.IsTerminal(apiStatus.Phase) {
		return true, nil
	}
	mounts, err := h.volumes.WaitForPodVolumes(ctx, pod)
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		h.log.Error(err, "Unable to attach or mount volumes for pod; skipping pod", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		h.events.Event(runtime.PodReference(pod, ""), v1.EventTypeWarning, volume.ReasonFailedMount, "Unable to attach or mount volumes: "+err.Error())
		h.setStatus(pod, podStatus, false, func(s *v1.PodStatus) {
			s.Reason, s.Message = volume.ReasonFailedMount, err.Error()
		})
		return false, err
	}
	cgroupParent, err := h.ensureCgroup(pod, updateType)
	if err != nil {
		h.log.Error(err, "Unable to create the pod's cgroup; skipping pod", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		return false, err
	}
	result := h.runtime.SyncPodWithOptions(ctx, pod, podStatus, runtime.SyncPodOptions{
		CgroupParent: cgroupParent,
		Unhealthy:    h.probes.Unhealthy,
		Mounts: func(pod *v1.Pod, c *v1.Container, env map[string]string) ([]runtime.Mount, error) {
			cms, err := h.volumes.ContainerMounts(pod, c, mounts, env)
			if err != nil {
				return nil, err
			}
			out := make([]runtime.Mount, len(cms))
			for i, m := range cms {
				out[i] = runtime.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly, Propagation: m.Propagation}
			}
			return out, nil
		},
	})
	// Read the pod back at once, rather than waiting for the next relist,
	// so that its status shows what this sync did. The cache takes it only
	// if nothing newer arrived meanwhile.
	h.refresh(ctx, pod, false, nil)
	return false, h.syncError(pod, result)
}

// ensureCgroup creates (or, for an updated pod, updates) the pod's cgroup
// and returns the sandbox's cgroup parent. A new pod first brings the QoS
// cgroups in step with the pods, as the kubelet does.
func (h *handler) ensureCgroup(pod *v1.Pod, updateType podworker.UpdateType) (string, error) {
	if !h.cgroups.Enabled() {
		return "", nil
	}
	if !h.cgroups.PodExists(pod) {
		if err := h.cgroups.UpdateQoS(h.activePods()); err != nil {
			h.log.Error(err, "Updating the QoS cgroups")
		}
	} else if updateType == podworker.SyncPodUpdate {
		if err := h.cgroups.UpdatePod(pod); err != nil {
			return "", err
		}
	}
	return h.cgroups.EnsurePod(pod)
}

// syncError turns a sync result into the worker's error. A container in
// back-off is not an error of the sync: the pod is queued again for when the
// back-off ends.
func (h *handler) syncError(pod *v1.Pod, result runtime.SyncResult) error {
	err := result.Err()
	if err == nil {
		return nil
	}
	if result.OnlyBackOff() {
		h.queue.Enqueue(pod.UID, time.Until(result.NextRetry()))
		return nil
	}
	return err
}

// refresh reads the pod's status from the runtime, stores it in the cache
// and reports the API status.
func (h *handler) refresh(ctx context.Context, pod *v1.Pod, terminal bool, edit func(*v1.PodStatus)) {
	ts := time.Now()
	st, err := h.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Error(err, "Reading pod status", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		}
		return
	}
	h.cache.Set(pod.UID, st, nil, ts)
	h.setStatus(pod, st, terminal, edit)
}

func (h *handler) setStatus(pod *v1.Pod, podStatus *runtime.PodStatus, terminal bool, edit func(*v1.PodStatus)) v1.PodStatus {
	in := status.Input{
		Pod:         pod,
		Runtime:     podStatus,
		RuntimeName: h.runtime.RuntimeName(),
		Probes:      h.probes,
		Waiting:     h.runtime,
		Terminal:    terminal,
	}
	if h.hostIPs != nil {
		in.HostIPs = h.hostIPs()
	}
	s := status.Generate(in)
	if s.StartTime == nil {
		now := metav1.Now()
		s.StartTime = &now
	}
	if edit != nil {
		edit(&s)
	}
	h.statuses.SetPodStatus(pod, s)
	got, _ := h.statuses.GetPodStatus(pod.UID)
	return got
}

// SyncTerminatingPod implements podworker.SyncFuncs: stop every container of
// the pod within the grace period.
func (h *handler) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, edit func(*v1.PodStatus)) error {
	h.probes.StopLivenessAndStartup(pod)
	h.setStatus(pod, podStatus, false, edit)
	if err := h.runtime.KillPod(ctx, pod, runtime.RunningPod(podStatus), &gracePeriod); err != nil {
		return fmt.Errorf("nodekit: stopping pod %s: %w", podmodel.FullName(pod), err)
	}
	h.refresh(ctx, pod, true, edit)
	return nil
}

// SyncTerminatingRuntimePod implements podworker.SyncFuncs: stop a pod known
// only from the runtime.
func (h *handler) SyncTerminatingRuntimePod(ctx context.Context, rp *runtime.Pod) error {
	if err := h.runtime.KillPod(ctx, nil, rp, nil); err != nil {
		return fmt.Errorf("nodekit: stopping orphaned pod %s/%s: %w", rp.Namespace, rp.Name, err)
	}
	return nil
}

// SyncTerminatedPod implements podworker.SyncFuncs: the pod's containers
// stopped, so its volumes and directory are released. Its runtime objects
// stay (for their exit codes) until the pod is gone from its source, when
// housekeeping removes them.
func (h *handler) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error {
	h.setStatus(pod, podStatus, true, nil)
	h.probes.RemovePod(pod)
	if err := h.volumes.ReleasePod(ctx, pod.UID); err != nil {
		return fmt.Errorf("nodekit: releasing the volumes of pod %s: %w", podmodel.FullName(pod), err)
	}
	if err := h.cgroups.DestroyPod(ctx, pod.UID); err != nil {
		return fmt.Errorf("nodekit: removing the cgroup of pod %s: %w", podmodel.FullName(pod), err)
	}
	if err := h.cgroups.UpdateQoS(h.activePods()); err != nil {
		h.log.Error(err, "Updating the QoS cgroups")
	}
	return nil
}
