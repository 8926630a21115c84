package runtime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// killReason says why a running container is killed; it selects the grace
// period (a probe's own terminationGracePeriodSeconds applies to probe
// failures).
type killReason string

const (
	killSpecChanged killReason = "SpecChanged"
	killLiveness    killReason = "Liveness"
	killStartup     killReason = "Startup"
	killUnknown     killReason = "Unknown"
	killRemoved     killReason = "Removed"
)

// containerToKill is a running (or unknown-state) container SyncPod stops.
type containerToKill struct {
	ID   string
	Name string
	// Container is its spec, nil when the container is no longer in the pod.
	Container *v1.Container
	Message   string
	Reason    killReason
}

// podActions is what SyncPod must do to bring a pod to its spec.
type podActions struct {
	// KillPod: stop every container and the sandbox first.
	KillPod bool
	// CreateSandbox: create a new sandbox (after KillPod) with Attempt.
	CreateSandbox bool
	// SandboxID of the current sandbox (the one to use when none is created).
	SandboxID string
	Attempt   uint32
	// InitContainersToStart are indexes into Spec.InitContainers, in
	// order: the next init container, or restartable init containers
	// (sidecars) to restart.
	InitContainersToStart []int
	// ContainersToStart are indexes into Spec.Containers, in order.
	ContainersToStart []int
	// ContainersToKill, in the order found.
	ContainersToKill []containerToKill
}

func (a podActions) String() string {
	return fmt.Sprintf("killPod=%v createSandbox=%v sandbox=%q attempt=%d init=%d start=%v kill=%d",
		a.KillPod, a.CreateSandbox, a.SandboxID, a.Attempt, a.InitContainersToStart, a.ContainersToStart, len(a.ContainersToKill))
}

// UnhealthyFunc reports whether a running container failed its liveness
// probe ("liveness") or startup probe ("startup"); "" when it did not.
type UnhealthyFunc func(containerID string) string

func isHostNetwork(pod *v1.Pod) bool { return pod.Spec.HostNetwork }

func networkNamespaceForPod(pod *v1.Pod) runtimeapi.NamespaceMode {
	if isHostNetwork(pod) {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// sandboxChanged reports whether the pod needs a new sandbox, the attempt
// number to give it, and the ID of the current sandbox (kubelet
// PodSandboxChanged).
func sandboxChanged(pod *v1.Pod, status *PodStatus) (bool, uint32, string) {
	if status == nil || len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	s := status.SandboxStatuses[0]
	attempt := s.GetMetadata().GetAttempt()
	if ready > 1 {
		return true, attempt + 1, s.GetId()
	}
	if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true, attempt + 1, s.GetId()
	}
	if s.GetLinux().GetNamespaces().GetOptions().GetNetwork() != networkNamespaceForPod(pod) {
		return true, attempt + 1, ""
	}
	if !isHostNetwork(pod) && s.GetNetwork() != nil && s.GetNetwork().GetIp() == "" {
		return true, attempt + 1, s.GetId()
	}
	return false, attempt, s.GetId()
}

// PodSandboxChanged reports whether SyncPod would create a new sandbox for
// the pod (the kubelet's PodSandboxChanged): none yet, none or several
// ready, a changed network namespace mode, or no IP for a pod-network
// sandbox.
func PodSandboxChanged(pod *v1.Pod, status *PodStatus) bool {
	changed, _, _ := sandboxChanged(pod, status)
	return changed
}

func shouldRestartOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func containerSucceeded(c *v1.Container, status *PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	return cs != nil && cs.State == ContainerStateExited && cs.ExitCode == 0
}

// ShouldContainerBeRestarted is the kubelet's ShouldContainerBeRestarted:
// whether SyncPod starts the container: one never started, in an unknown
// or created state, or exited when the restart policy allows; none of a pod
// being deleted.
func ShouldContainerBeRestarted(c *v1.Container, pod *v1.Pod, status *PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil {
		return true
	}
	switch cs.State {
	case ContainerStateRunning:
		return false
	case ContainerStateUnknown, ContainerStateCreated:
		return true
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return cs.ExitCode != 0
	}
	return true
}

func isInitContainerFailed(cs *ContainerStatus) bool {
	if cs.Reason == "OOMKilled" {
		return true
	}
	if cs.State == ContainerStateExited && cs.ExitCode != 0 {
		return true
	}
	return cs.State == ContainerStateUnknown
}

// findNextInitContainerToRun returns the status of the last failed init
// container (if any), the index of the next init container to run (-1 for
// none) and whether initialization is done. Restartable init containers
// (sidecars) are treated as ordinary init containers.
func findNextInitContainerToRun(pod *v1.Pod, status *PodStatus) (*ContainerStatus, int, bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return nil, -1, true
	}
	// A running app container means initialization finished at some point,
	// even if the init containers were removed since.
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs != nil && cs.State == ContainerStateRunning {
			return nil, -1, true
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		cs := status.FindContainerStatusByName(inits[i].Name)
		if cs != nil && isInitContainerFailed(cs) {
			return cs, i, false
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		cs := status.FindContainerStatusByName(inits[i].Name)
		if cs == nil {
			continue
		}
		if cs.State == ContainerStateRunning {
			return nil, -1, false
		}
		if cs.State == ContainerStateExited {
			if i == len(inits)-1 {
				return nil, -1, true
			}
			return nil, i + 1, false
		}
	}
	return nil, 0, false
}

// specContainerNames returns the names of every container of the pod spec.
func specContainerNames(pod *v1.Pod) map[string]bool {
	names := make(map[string]bool, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		names[pod.Spec.InitContainers[i].Name] = true
	}
	for i := range pod.Spec.Containers {
		names[pod.Spec.Containers[i].Name] = true
	}
	for i := range pod.Spec.EphemeralContainers {
		names[pod.Spec.EphemeralContainers[i].Name] = true
	}
	return names
}

// computePodActions decides what SyncPod does, as the kubelet's function of
// the same name: a pure function of the pod, its runtime status and the
// probe results.
func computePodActions(pod *v1.Pod, status *PodStatus, unhealthy UnhealthyFunc) podActions {
	if status == nil {
		status = &PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	create, attempt, sandboxID := sandboxChanged(pod, status)
	a := podActions{
		KillPod:       create,
		CreateSandbox: create,
		SandboxID:     sandboxID,
		Attempt:       attempt,
	}

	if create {
		if !shouldRestartOnFailure(pod) && attempt != 0 && len(status.ContainerStatuses) != 0 {
			// The pod ran and must not restart: only make sure it is dead.
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && containerSucceeded(c, status) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 {
			done := anyRegularContainerCreated(pod, status)
			if !hasRestartableInit(pod) {
				_, _, done = findNextInitContainerToRun(pod, status)
			}
			if done {
				a.CreateSandbox = false
				return a
			}
		}
		if len(pod.Spec.InitContainers) != 0 {
			a.InitContainersToStart = []int{0}
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	// Containers that are not in the spec any more are stopped.
	names := specContainerNames(pod)
	seen := map[string]bool{}
	for _, cs := range status.ContainerStatuses {
		if names[cs.Name] || seen[cs.ID] {
			continue
		}
		seen[cs.ID] = true
		if cs.State == ContainerStateRunning || cs.State == ContainerStateUnknown {
			a.ContainersToKill = append(a.ContainersToKill, containerToKill{
				ID: cs.ID, Name: cs.Name, Reason: killRemoved,
				Message: fmt.Sprintf("Container %s is not in the pod spec", cs.Name),
			})
		}
	}

	if hasRestartableInit(pod) {
		if !computeSidecarInitActions(pod, status, unhealthy, &a) || a.KillPod {
			return a
		}
	} else if last, next, done := findNextInitContainerToRun(pod, status); !done {
		if next >= 0 {
			if last != nil && isInitContainerFailed(last) && !shouldRestartOnFailure(pod) {
				a.KillPod = true
			} else {
				if last != nil && last.State == ContainerStateUnknown {
					a.ContainersToKill = append(a.ContainersToKill, containerToKill{
						ID: last.ID, Name: last.Name, Container: &pod.Spec.InitContainers[next], Reason: killUnknown,
						Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", last.State),
					})
				}
				a.InitContainersToStart = []int{next}
			}
		}
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != ContainerStateRunning {
			if ShouldContainerBeRestarted(c, pod, status) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if cs != nil && cs.State == ContainerStateUnknown {
					a.ContainersToKill = append(a.ContainersToKill, containerToKill{
						ID: cs.ID, Name: cs.Name, Container: c, Reason: killUnknown,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State),
					})
				}
			}
			continue
		}
		k, restart, ok := checkRunning(c, cs, pod, unhealthy)
		if !ok {
			keep++
			continue
		}
		if restart {
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill = append(a.ContainersToKill, k)
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		// Sidecars alone do not keep a pod alive.
		a.InitContainersToStart = nil
	}
	return a
}

// checkRunning decides whether a running container must be killed: its
// spec changed (always restarted) or it failed its liveness or startup
// probe (restarted per the restart policy; always for a sidecar).
func checkRunning(c *v1.Container, cs *ContainerStatus, pod *v1.Pod, unhealthy UnhealthyFunc) (k containerToKill, restart, kill bool) {
	restart = shouldRestartOnFailure(pod) || podmodel.IsRestartableInit(c)
	probe := ""
	if unhealthy != nil {
		probe = unhealthy(cs.ID)
	}
	k = containerToKill{ID: cs.ID, Name: cs.Name, Container: c}
	switch {
	case HashContainer(c) != cs.Hash:
		k.Message = fmt.Sprintf("Container %s definition changed", c.Name)
		k.Reason = killSpecChanged
		restart = true
	case probe == "liveness":
		k.Message = fmt.Sprintf("Container %s failed liveness probe", c.Name)
		k.Reason = killLiveness
	case probe == "startup":
		k.Message = fmt.Sprintf("Container %s failed startup probe", c.Name)
		k.Reason = killStartup
	default:
		return containerToKill{}, false, false
	}
	if restart {
		k.Message += ", will be restarted"
	}
	return k, restart, true
}

func hasRestartableInit(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if podmodel.IsRestartableInit(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// anyRegularContainerCreated reports whether an app container has an
// instance: the pod was initialized at some point.
func anyRegularContainerCreated(pod *v1.Pod, status *PodStatus) bool {
	for i := range pod.Spec.Containers {
		if status.FindContainerStatusByName(pod.Spec.Containers[i].Name) != nil {
			return true
		}
	}
	return false
}

// computeSidecarInitActions is the init phase of a pod with restartable
// init containers (sidecars), a reduced form of the kubelet's
// computeInitContainerActions: init containers run in order; a sidecar
// counts as done once it runs (startup probes are not waited for) and is
// restarted whenever it is not running, also after initialization; an
// ordinary init container must exit 0 before the next starts. It reports
// whether the pod is initialized.
func computeSidecarInitActions(pod *v1.Pod, status *PodStatus, unhealthy UnhealthyFunc, a *podActions) bool {
	initialized := anyRegularContainerCreated(pod, status)
	killUnknownInit := func(i int, cs *ContainerStatus) {
		if cs != nil && cs.State == ContainerStateUnknown {
			a.ContainersToKill = append(a.ContainersToKill, containerToKill{
				ID: cs.ID, Name: cs.Name, Container: &pod.Spec.InitContainers[i], Reason: killUnknown,
				Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State),
			})
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := status.FindContainerStatusByName(c.Name)
		restartable := podmodel.IsRestartableInit(c)
		if restartable && cs != nil && cs.State == ContainerStateRunning {
			if k, _, kill := checkRunning(c, cs, pod, unhealthy); kill {
				a.ContainersToKill = append(a.ContainersToKill, k)
				a.InitContainersToStart = append(a.InitContainersToStart, i)
			}
			continue
		}
		if initialized {
			// Only sidecars are kept running once the pod is initialized.
			if restartable && pod.DeletionTimestamp == nil {
				killUnknownInit(i, cs)
				a.InitContainersToStart = append(a.InitContainersToStart, i)
			}
			continue
		}
		switch {
		case cs == nil:
		case restartable:
			killUnknownInit(i, cs)
		case cs.State == ContainerStateRunning:
			return false
		case cs.State == ContainerStateCreated:
		case !isInitContainerFailed(cs):
			continue // exited 0
		case !shouldRestartOnFailure(pod):
			a.KillPod = true
			return false
		default:
			killUnknownInit(i, cs)
		}
		a.InitContainersToStart = append(a.InitContainersToStart, i)
		return false
	}
	return true
}
