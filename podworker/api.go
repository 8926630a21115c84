package podworker

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// UpdateType says why a pod worker is asked to act.
type UpdateType int

// The update types, as the kubelet names them.
const (
	// SyncPodSync: a periodic or event-driven sync of a known pod.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate: the pod's spec changed.
	SyncPodUpdate
	// SyncPodCreate: the pod is new to the node.
	SyncPodCreate
	// SyncPodKill: the pod must stop (removed, deleted, evicted, rejected).
	SyncPodKill
)

func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return "unknown"
}

// KillPodOptions go with a SyncPodKill update.
type KillPodOptions struct {
	// CompletedCh, when set, is closed once the pod has terminated (all its
	// containers stopped).
	CompletedCh chan<- struct{}
	// Evict marks a kill by the agent itself (eviction, rejection): the pod
	// becomes terminal in the status.
	Evict bool
	// PodStatusFunc, when set, edits the status reported while the pod
	// terminates (for example the phase and reason of an eviction).
	PodStatusFunc func(*v1.PodStatus)
	// PodTerminationGracePeriodSecondsOverride, when set, replaces the grace
	// period of the pod's first kill, as the kubelet does; once the pod is
	// terminating, later kills can only shrink the grace period.
	PodTerminationGracePeriodSecondsOverride *int64
}

// UpdateOptions is one request to a pod's worker.
type UpdateOptions struct {
	UpdateType UpdateType
	// Pod is the desired pod; nil only for a kill of a pod known solely from
	// the runtime (RunningPod set).
	Pod *v1.Pod
	// RunningPod is a pod found in the runtime with no config behind it
	// (an orphan); only with SyncPodKill.
	RunningPod *runtime.Pod
	// KillPodOptions, only with SyncPodKill.
	KillPodOptions *KillPodOptions
}

// SyncFuncs is what a pod worker calls; the agent's SyncHandler implements
// it. Every call for one pod UID happens on that pod's worker goroutine,
// never two at once. The pods and statuses given are shared with the rest
// of the agent: treat them as read-only.
type SyncFuncs interface {
	// SyncPod brings a pod that should run towards its desired state. It
	// returns isTerminal when the pod reached a terminal phase (all its
	// containers ran to completion and will not restart), after which the
	// worker moves it to terminating. ctx is cancelled when the pod starts
	// terminating while a sync is in flight.
	SyncPod(ctx context.Context, updateType UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops every container of the pod within
	// gracePeriod seconds. It is retried until it returns nil.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error
	// SyncTerminatingRuntimePod stops a pod known only from the runtime
	// (no config), with its own grace period or the minimum.
	SyncTerminatingRuntimePod(ctx context.Context, runningPod *runtime.Pod) error
	// SyncTerminatedPod releases what the pod held (volumes, cgroups,
	// directories, the sandbox) after all its containers stopped. It is
	// retried until it returns nil.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error
}
