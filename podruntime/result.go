package podruntime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The classes of SyncPod failures. Each is also the reason the kubelet
// shows in a container's Waiting state (Reason returns it without the
// "runtime: " prefix), so the error of a failed start becomes the
// container's waiting reason (Manager.WaitingReason). Test with errors.Is.
var (
	// ErrCrashLoopBackOff: the container exited and is waiting out its
	// restart back-off. Not a failure of the sync: retry at NextRetry.
	ErrCrashLoopBackOff = errors.New("runtime: CrashLoopBackOff")
	// ErrImagePullBackOff: pulling the image failed recently and the next
	// pull waits out the image back-off. Not a failure of the sync.
	ErrImagePullBackOff = errors.New("runtime: ImagePullBackOff")
	// ErrImagePull: pulling the image failed.
	ErrImagePull = errors.New("runtime: ErrImagePull")
	// ErrImageNeverPull: the image is absent and the pull policy is Never.
	ErrImageNeverPull = errors.New("runtime: ErrImageNeverPull")
	// ErrImageInspect: the runtime could not report the image's status.
	ErrImageInspect = errors.New("runtime: ImageInspectError")
	// ErrCreateContainerConfig: the container's configuration could not be
	// built (an environment variable or a volume that cannot be resolved).
	ErrCreateContainerConfig = errors.New("runtime: CreateContainerConfigError")
	// ErrCreateContainer: the runtime failed CreateContainer.
	ErrCreateContainer = errors.New("runtime: CreateContainerError")
	// ErrRunContainer: the runtime failed StartContainer.
	ErrRunContainer = errors.New("runtime: RunContainerError")
	// ErrKillContainer: the runtime failed StopContainer.
	ErrKillContainer = errors.New("runtime: KillContainerError")
	// ErrCreatePodSandbox: the runtime failed RunPodSandbox (or its status).
	ErrCreatePodSandbox = errors.New("runtime: CreatePodSandboxError")
	// ErrKillPodSandbox: the runtime failed StopPodSandbox.
	ErrKillPodSandbox = errors.New("runtime: KillPodSandboxError")
	// ErrRemoveContainer: the runtime failed RemoveContainer.
	ErrRemoveContainer = errors.New("runtime: RemoveContainerError")

	// ErrRuntimeNotReady: the runtime reports RuntimeReady false (Status).
	ErrRuntimeNotReady = errors.New("runtime: container runtime not ready")
	// ErrNetworkNotReady: the runtime reports NetworkReady false (Status).
	// Pods on the host network can still run.
	ErrNetworkNotReady = errors.New("runtime: container runtime network not ready")
)

// reasonClasses are the errors whose name is a container waiting reason.
func reasonClasses() []error {
	return []error{
		ErrCrashLoopBackOff, ErrImagePullBackOff, ErrImagePull, ErrImageNeverPull,
		ErrImageInspect, ErrCreateContainerConfig, ErrCreateContainer, ErrRunContainer,
		ErrKillContainer, ErrCreatePodSandbox, ErrKillPodSandbox, ErrRemoveContainer,
		ErrPostStartHook,
	}
}

// Reason returns the kubelet reason ("CrashLoopBackOff", "ErrImagePull",
// ...) of the first class err belongs to, or "" when it belongs to none.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range reasonClasses() {
		if errors.Is(err, c) {
			return strings.TrimPrefix(c.Error(), "runtime: ")
		}
	}
	return ""
}

// SyncAction names what one step of SyncPod did.
type SyncAction string

// The steps of a sync, as the kubelet names them.
const (
	ActionStartContainer   SyncAction = "StartContainer"
	ActionKillContainer    SyncAction = "KillContainer"
	ActionRemoveContainer  SyncAction = "RemoveContainer"
	ActionCreatePodSandbox SyncAction = "CreatePodSandbox"
	ActionKillPodSandbox   SyncAction = "KillPodSandbox"
)

// ActionResult is the outcome of one step of a sync.
type ActionResult struct {
	Action SyncAction
	// Target is the container name (container actions) or the sandbox ID /
	// pod full name (sandbox actions).
	Target string
	// Err is nil on success; otherwise it wraps one of the Err* classes.
	Err error
	// Message is the human-readable detail shown in the container's Waiting
	// state ("back-off 20s restarting failed container=...").
	Message string
	// RetryAt is set for back-off waits: when the wait ends.
	RetryAt time.Time
}

// SyncResult is what SyncPod did, one entry per step, in order.
type SyncResult struct {
	Results []ActionResult

	// sandboxes and containers are the sandboxes and containers the
	// sync created (containers with their sandbox ID), for
	// Manager.PodStatusAfterSync.
	sandboxes  []string
	containers []*runtimeapi.Container
}

func (r *SyncResult) add(a ActionResult) { r.Results = append(r.Results, a) }

// Err joins the errors of every failed step, or returns nil when all
// succeeded. Back-off waits are included (see OnlyBackOff).
func (r SyncResult) Err() error {
	var errs []error
	for _, a := range r.Results {
		if a.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", a.Action, a.Target, a.Err))
		}
	}
	return errors.Join(errs...)
}

// OnlyBackOff reports whether the sync failed only because containers or
// images are waiting out a back-off (ErrCrashLoopBackOff,
// ErrImagePullBackOff). The kubelet does not count such a sync as an error;
// retry it at NextRetry.
func (r SyncResult) OnlyBackOff() bool {
	failed := false
	for _, a := range r.Results {
		if a.Err == nil {
			continue
		}
		failed = true
		if !errors.Is(a.Err, ErrCrashLoopBackOff) && !errors.Is(a.Err, ErrImagePullBackOff) {
			return false
		}
	}
	return failed
}

// RemovedContainers reports whether the sync removed a container: after a
// RestartAllContainers sync, sync the pod again at once to start it over.
func (r SyncResult) RemovedContainers() bool {
	for _, a := range r.Results {
		if a.Action == ActionRemoveContainer && a.Err == nil {
			return true
		}
	}
	return false
}

// OnlyStarts reports whether the sync created sandboxes and started
// containers, all with success, and did nothing else (back-off waits
// aside, which make no runtime call): the changes whose container events
// (CREATED, STARTED) carry the pod's status, in which ShownIn then finds
// them. It is false for a sync that changed nothing.
func (r SyncResult) OnlyStarts() bool {
	started := false
	for _, a := range r.Results {
		switch {
		case a.Err != nil && (errors.Is(a.Err, ErrCrashLoopBackOff) || errors.Is(a.Err, ErrImagePullBackOff)):
		case a.Err != nil:
			return false
		case a.Action == ActionCreatePodSandbox || a.Action == ActionStartContainer:
			started = true
		default:
			return false
		}
	}
	return started
}

// ShownIn reports whether st shows every sandbox the sync created and
// every container it created past its creation: running, or exited
// already.
func (r SyncResult) ShownIn(st *runtime.PodStatus) bool {
	for _, id := range r.sandboxes {
		if !slices.ContainsFunc(st.SandboxStatuses, func(s *runtimeapi.PodSandboxStatus) bool { return s.GetId() == id }) {
			return false
		}
	}
	for _, c := range r.containers {
		i := slices.IndexFunc(st.ContainerStatuses, func(s *runtime.ContainerStatus) bool { return s.ID == c.GetId() })
		if i < 0 {
			return false
		}
		if s := st.ContainerStatuses[i].State; s != runtime.ContainerStateRunning && s != runtime.ContainerStateExited {
			return false
		}
	}
	return true
}

// NextRetry returns the earliest end of a back-off wait in the result, or
// the zero time when there is none.
func (r SyncResult) NextRetry() time.Time {
	var t time.Time
	for _, a := range r.Results {
		if !a.RetryAt.IsZero() && (t.IsZero() || a.RetryAt.Before(t)) {
			t = a.RetryAt
		}
	}
	return t
}
