package nodekit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/syncloop"
)

// The parts Handler uses beyond those of PodSyncer, each with only the
// methods it calls. The defaults are podworker.Workers, volume.Manager,
// probe.Manager, cgroup.PodManager, runtime.Manager, pleg.Cache and
// mirror.Manager.
type (
	// PodWorkers run one goroutine per pod.
	PodWorkers interface {
		UpdatePod(opts podworker.UpdateOptions)
		IsPodTerminationRequested(uid types.UID) bool
		IsPodKnownTerminated(uid types.UID) bool
		SyncKnownPods(desired []*v1.Pod) map[types.UID]podworker.PodWorkerSync
	}
	// VolumeSet tracks which pods need their volumes.
	VolumeSet interface {
		AddPod(pod *v1.Pod)
		CleanupOrphans(ctx context.Context, keep map[types.UID]bool) error
	}
	// ProbeSet runs the pods' probe workers.
	ProbeSet interface {
		AddPod(pod *v1.Pod)
		RemovePod(pod *v1.Pod)
		CleanupPods(desired map[types.UID]bool)
	}
	// NodeCgroups keeps the QoS cgroups and finds orphaned pod cgroups.
	NodeCgroups interface {
		Enabled() bool
		UpdateQoS(activePods []*v1.Pod) error
		Pods() ([]types.UID, error)
		DestroyPod(ctx context.Context, uid types.UID) error
	}
	// RuntimePods lists and removes what the runtime holds of pods.
	RuntimePods interface {
		GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error)
		RemovePod(ctx context.Context, uid types.UID) error
		Forget(uid types.UID)
	}
	// StatusSet holds the pods' API statuses and forgets those of pods
	// that are gone.
	StatusSet interface {
		PodStatuses
		// PodTerminated is told of a rejected pod: it never runs.
		PodTerminated(uid types.UID)
		RemoveOrphans(desired map[types.UID]bool)
	}
	// CacheDeleter forgets a pod's cached runtime status.
	CacheDeleter interface{ Delete(uid types.UID) }
	// MirrorPods keeps the mirror pods of the static pods.
	MirrorPods interface {
		Sync(ctx context.Context, staticPods []*v1.Pod) error
	}
)

// HandlerConfig holds the parts of a Handler. Every field but Admit,
// Mirrors and Logger is required.
type HandlerConfig struct {
	Pods     *PodManager
	Workers  PodWorkers
	Statuses StatusSet
	Volumes  VolumeSet
	Probes   ProbeSet
	Cgroups  NodeCgroups
	Runtime  RuntimePods
	Cache    CacheDeleter
	// Admit are the admission checks, in order; the first rejection
	// wins. Defaults to none: every pod is admitted.
	Admit []admission.Handler
	// Mirrors keeps mirror pods; nil for a standalone agent.
	Mirrors MirrorPods
	Logger  logr.Logger
}

// Handler is the default syncloop.SyncHandler, the kubelet's pod handling:
// it records the pods, admits new ones, hands each pod to its worker and
// runs housekeeping. It is safe for concurrent use; the sync loop calls it
// from one goroutine.
//
// Build it from the default parts with the Agent (Options.Admit adds
// admission checks, Options.PodSyncer replaces the per-pod sync), or
// assemble it with NewHandler from parts of your own; wrap it with
// Options.WrapHandler to observe or change the loop's work.
type Handler struct {
	c HandlerConfig

	mu sync.Mutex
	// rejected holds the pods admission turned away; they are never handed
	// to a worker.
	rejected map[types.UID]bool
	// qosPods is the set of active pods the QoS cgroups were last sized
	// for (a hash of their UIDs), so that housekeeping writes them only
	// when it changed.
	qosPods uint64
}

var _ syncloop.SyncHandler = (*Handler)(nil)

// NewHandler checks c and returns a Handler over its parts.
func NewHandler(c HandlerConfig) (*Handler, error) {
	if c.Pods == nil || c.Workers == nil || c.Statuses == nil || c.Volumes == nil || c.Probes == nil || c.Cgroups == nil || c.Runtime == nil || c.Cache == nil {
		return nil, errors.New("nodekit: HandlerConfig needs Pods, Workers, Statuses, Volumes, Probes, Cgroups, Runtime and Cache")
	}
	return &Handler{c: c, rejected: make(map[types.UID]bool)}, nil
}

func (h *Handler) isRejected(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rejected[uid]
}

// HandlePodAdditions admits the pods, oldest first, and starts them. The
// QoS cgroups are brought in step with the admitted pods first, as the
// kubelet does before it creates a pod's cgroup.
func (h *Handler) HandlePodAdditions(_ context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, false)
	if len(pods) == 0 {
		return
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	// The active pods are computed once for the batch, and each admitted
	// pod joins them: admission stays linear in the number of pods.
	active := h.activePods()
	start := pods[:0:0]
	for _, pod := range pods {
		h.c.Pods.AddOrUpdate(pod)
		if !h.c.Workers.IsPodTerminationRequested(pod.UID) && !podmodel.IsTerminal(pod.Status.Phase) {
			if r := h.canAdmit(pod, active); !r.Admit {
				h.reject(pod, r)
				continue
			}
			active = append(active, pod)
		}
		start = append(start, pod)
	}
	h.updateQoS(active)
	for _, pod := range start {
		h.addVolumes(pod)
		h.c.Probes.AddPod(pod)
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})
	}
}

// ActivePods are the admitted pods that may still run.
func (h *Handler) ActivePods() []*v1.Pod { return h.activePods() }

func (h *Handler) activePods() []*v1.Pod {
	var active []*v1.Pod
	for _, p := range h.c.Pods.Pods() {
		if h.isRejected(p.UID) || h.c.Workers.IsPodKnownTerminated(p.UID) {
			continue
		}
		if s, ok := h.c.Statuses.GetPodStatus(p.UID); ok && podmodel.IsTerminal(s.Phase) {
			continue
		}
		active = append(active, p)
	}
	return active
}

// updateQoS sizes the QoS cgroups for the active pods, unless they were
// sized for the same pods last time.
func (h *Handler) updateQoS(active []*v1.Pod) {
	if !h.c.Cgroups.Enabled() {
		return
	}
	var sum uint64 = uint64(len(active))
	for _, p := range active {
		f := fnv.New64a()
		f.Write([]byte(p.UID))
		sum += f.Sum64()
	}
	h.mu.Lock()
	same := sum == h.qosPods
	h.mu.Unlock()
	if same {
		return
	}
	if err := h.c.Cgroups.UpdateQoS(active); err != nil {
		h.c.Logger.Error(err, "Updating the QoS cgroups")
		return
	}
	h.mu.Lock()
	h.qosPods = sum
	h.mu.Unlock()
}

func (h *Handler) canAdmit(pod *v1.Pod, active []*v1.Pod) admission.Result {
	for _, a := range h.c.Admit {
		if r := a.Admit(pod, active); !r.Admit {
			return r
		}
	}
	return admission.Result{Admit: true}
}

func (h *Handler) reject(pod *v1.Pod, r admission.Result) {
	h.c.Logger.Info("Pod rejected", "pod", podmodel.FullName(pod), "podUID", pod.UID, "reason", r.Reason, "message", r.Message)
	h.mu.Lock()
	h.rejected[pod.UID] = true
	h.mu.Unlock()
	h.c.Statuses.PodTerminated(pod.UID)
	h.c.Statuses.SetPodStatus(pod, v1.PodStatus{
		Phase:   v1.PodFailed,
		Reason:  r.Reason,
		Message: "Pod was rejected: " + r.Message,
	})
}

// HandlePodUpdates records the new pods and syncs them.
func (h *Handler) HandlePodUpdates(_ context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, false)
	for _, pod := range pods {
		h.c.Pods.AddOrUpdate(pod)
		if h.isRejected(pod.UID) {
			continue
		}
		h.addVolumes(pod)
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodUpdate, Pod: pod})
	}
}

// addVolumes makes the pod's volumes desired, unless its termination was
// requested, as the kubelet's volume populator: the volumes of a
// terminating pod are desired already, and those of a terminated pod are
// released, so an update (the API server's answer to the final delete,
// say) must not make its directory again: nothing would release it.
func (h *Handler) addVolumes(pod *v1.Pod) {
	if h.c.Workers.IsPodTerminationRequested(pod.UID) {
		return
	}
	h.c.Volumes.AddPod(pod)
}

// HandlePodRemoves forgets the pods and stops them.
func (h *Handler) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, true)
	for _, pod := range pods {
		h.c.Pods.Remove(pod)
		if h.isRejected(pod.UID) {
			continue
		}
		h.c.Probes.RemovePod(pod)
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodKill, Pod: pod})
	}
}

// HandlePodReconcile records pods whose status alone changed at their
// source; a pod its source says is terminal is synced so that it stops.
func (h *Handler) HandlePodReconcile(_ context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, false)
	for _, pod := range pods {
		h.c.Pods.AddOrUpdate(pod)
		if !h.isRejected(pod.UID) && podmodel.IsTerminal(pod.Status.Phase) {
			h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
		}
	}
}

// HandlePodSyncs syncs the pods.
func (h *Handler) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		if h.isRejected(pod.UID) {
			continue
		}
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
	}
}

// HandlePodCleanups is housekeeping, run once every source is ready: stop
// workers of pods no source lists, stop containers of pods nobody knows
// (left by an earlier run of the agent), remove the runtime objects and
// agent state of pods that are gone, shrink the QoS cgroups to the active
// pods and keep the mirror pods.
func (h *Handler) HandlePodCleanups(ctx context.Context) error {
	desired := h.c.Pods.Pods()
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

	workers := h.c.Workers.SyncKnownPods(desired)
	h.c.Statuses.RemoveOrphans(desiredUIDs)
	h.c.Probes.CleanupPods(desiredUIDs)

	all, err := h.c.Runtime.GetPods(ctx, true)
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
	if err := h.c.Volumes.CleanupOrphans(ctx, keep); err != nil {
		errs = append(errs, err)
	}
	if err := h.cleanupCgroups(ctx, keep, workers); err != nil {
		errs = append(errs, err)
	}
	h.updateQoS(h.activePods())
	if h.c.Mirrors != nil {
		var static []*v1.Pod
		for _, p := range desired {
			if podmodel.IsStatic(p) && !h.isRejected(p.UID) {
				static = append(static, p)
			}
		}
		if err := h.c.Mirrors.Sync(ctx, static); err != nil {
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
			h.c.Logger.V(1).Info("Stopping pod unknown to the agent", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
			h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp})
			continue
		}
		// Nothing runs and nobody wants it: remove what is left.
		if err := h.c.Runtime.RemovePod(ctx, rp.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing pod %s: %w", rp.ID, err))
			continue
		}
		h.c.Runtime.Forget(rp.ID)
		h.c.Cache.Delete(rp.ID)
		h.c.Logger.V(1).Info("Removed pod from the runtime", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
	}
	return errors.Join(errs...)
}

// cleanupCgroups removes the cgroups of pods nobody wants, that have no
// worker and nothing in the runtime.
func (h *Handler) cleanupCgroups(ctx context.Context, keep map[types.UID]bool, workers map[types.UID]podworker.PodWorkerSync) error {
	if !h.c.Cgroups.Enabled() {
		return nil
	}
	uids, err := h.c.Cgroups.Pods()
	if err != nil {
		return fmt.Errorf("nodekit: housekeeping: listing pod cgroups: %w", err)
	}
	var errs []error
	for _, uid := range uids {
		if _, known := workers[uid]; known || keep[uid] {
			continue
		}
		if err := h.c.Cgroups.DestroyPod(ctx, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		h.c.Logger.V(1).Info("Removed orphaned pod cgroup", "podUID", uid)
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
