package podruntime

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
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
	killRestartAll  killReason = "RestartAllContainers"
	killResize      killReason = "Resize"
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
	// EphemeralContainersToStart are indexes into
	// Spec.EphemeralContainers: the ones never started (ephemeral.go).
	EphemeralContainersToStart []int
	// ContainersToKill, in the order found.
	ContainersToKill []containerToKill
	// ContainersToReset are removed from the runtime (stopped first when
	// Kill) because a container exited with a RestartAllContainers rule:
	// the other containers first, init containers after app containers,
	// and the containers that triggered the restart last.
	ContainersToReset []containerToReset
	// ContainersToUpdate are the running containers resized in place,
	// per resource (cpu, memory), decreases first (computePodResizeAction).
	ContainersToUpdate map[v1.ResourceName][]containerToUpdate
	// UpdatePodResources: a container restarts for its resize, so the pod
	// cgroup takes the new values too.
	UpdatePodResources bool
}

// containerToReset is one container instance a RestartAllContainers
// action removes.
type containerToReset struct {
	ID        string
	Name      string
	Container *v1.Container
	// Kill: the instance may still run; stop it (grace 0) before removal.
	Kill bool
}

func (a podActions) String() string {
	return fmt.Sprintf("killPod=%v createSandbox=%v sandbox=%q attempt=%d init=%d start=%v ephemeral=%v kill=%d reset=%d update=%d",
		a.KillPod, a.CreateSandbox, a.SandboxID, a.Attempt, a.InitContainersToStart, a.ContainersToStart, a.EphemeralContainersToStart, len(a.ContainersToKill), len(a.ContainersToReset),
		len(a.ContainersToUpdate[v1.ResourceCPU])+len(a.ContainersToUpdate[v1.ResourceMemory]))
}

// UnhealthyFunc reports whether a running container failed its liveness
// probe ("liveness") or startup probe ("startup"); "" when it did not.
type UnhealthyFunc func(containerID string) string

// StartedFunc reports whether a running container counts as started: its
// startup probe succeeded, or it has none.
type StartedFunc func(containerID string) bool

func isHostNetwork(pod *v1.Pod) bool { return pod.Spec.HostNetwork }

func shouldRestartOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func containerSucceeded(c *v1.Container, status *runtime.PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	return cs != nil && cs.State == runtime.ContainerStateExited && cs.ExitCode == 0
}

func isInitContainerFailed(cs *runtime.ContainerStatus) bool {
	if cs.Reason == "OOMKilled" {
		return true
	}
	if cs.State == runtime.ContainerStateExited && cs.ExitCode != 0 {
		return true
	}
	return cs.State == runtime.ContainerStateUnknown
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
// the same name: a pure function of the pod, its runtime status, the probe
// results (opts.Unhealthy, opts.Started) and opts.RestartAllContainers.
func computePodActions(pod *v1.Pod, status *runtime.PodStatus, opts SyncPodOptions) podActions {
	if status == nil {
		status = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	create, attempt, sandboxID, _ := runtime.PodSandboxChanged(pod, status)
	a := podActions{
		KillPod:       create,
		CreateSandbox: create,
		SandboxID:     sandboxID,
		Attempt:       attempt,
	}

	if opts.RestartAllContainers {
		// Remove every container, the ones that triggered the restart
		// last; the next sync starts the pod over in the same sandbox.
		srcInit, tgtInit := containersToReset(pod.Spec.InitContainers, status)
		src, tgt := containersToReset(pod.Spec.Containers, status)
		a.ContainersToReset = append(append(append(append(a.ContainersToReset, tgt...), tgtInit...), src...), srcInit...)
		return a
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
			runOnce := pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
			if c.RestartPolicy != nil {
				runOnce = *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
			}
			if runOnce && containerSucceeded(c, status) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 && runtime.HasAnyRegularContainerCreated(pod, status) {
			// Initialized and nothing left to run: no new sandbox.
			a.CreateSandbox = false
			return a
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
		if cs.State == runtime.ContainerStateRunning || cs.State == runtime.ContainerStateUnknown {
			a.ContainersToKill = append(a.ContainersToKill, containerToKill{
				ID: cs.ID, Name: cs.Name, Reason: killRemoved,
				Message: fmt.Sprintf("Container %s is not in the pod spec", cs.Name),
			})
		}
	}

	// Ephemeral containers may start before the pod is initialized.
	a.EphemeralContainersToStart = ephemeralContainersToStart(pod, status)

	if initialized := computeInitContainerActions(pod, status, opts, &a); a.KillPod || !initialized {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != runtime.ContainerStateRunning {
			if runtime.ShouldContainerBeRestarted(c, pod, status) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if cs != nil && cs.State == runtime.ContainerStateUnknown {
					a.ContainersToKill = append(a.ContainersToKill, containerToKill{
						ID: cs.ID, Name: cs.Name, Container: c, Reason: killUnknown,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State),
					})
				}
			}
			continue
		}
		// A running container is killed when its spec changed (and always
		// restarted) or it failed a probe (restarted per its own restart
		// policy, else the pod's; restart rules need an exit code).
		restart := shouldRestartOnFailure(pod)
		if c.RestartPolicy != nil {
			restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
		}
		k := containerToKill{ID: cs.ID, Name: cs.Name, Container: c}
		switch probe := unhealthy(opts, cs.ID); {
		case runtime.HashContainer(c) != cs.Hash:
			k.Message = fmt.Sprintf("Container %s definition changed", c.Name)
			k.Reason = killSpecChanged
			restart = true
		case probe == "liveness":
			k.Message = fmt.Sprintf("Container %s failed liveness probe", c.Name)
			k.Reason = killLiveness
		case probe == "startup":
			k.Message = fmt.Sprintf("Container %s failed startup probe", c.Name)
			k.Reason = killStartup
		case runtime.ResizeAllowed(pod) && !computePodResizeAction(pod, i, cs, &a):
			// Restarted for its resize (resizePolicy RestartContainer).
			continue
		default:
			keep++
			continue
		}
		if restart {
			k.Message += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill = append(a.ContainersToKill, k)
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		// Sidecars alone do not keep a pod alive.
		a.InitContainersToStart = nil
	}
	if !a.KillPod && runtime.ResizeAllowed(pod) && podCgroupResizeNeeded(pod, opts.PodCgroup) {
		// A resize of the pod-level resources: the pod cgroup moves
		// to them, in order with any container's update.
		a.UpdatePodResources = true
	}
	return a
}

func unhealthy(opts SyncPodOptions, id string) string {
	if opts.Unhealthy == nil {
		return ""
	}
	return opts.Unhealthy(id)
}

func started(opts SyncPodOptions, id string) bool {
	return opts.Started == nil || opts.Started(id)
}

// containersToReset lists every instance of the containers, split into
// those that exited with a RestartAllContainers rule (sources) and the
// others (targets); instances that have not exited are stopped first.
func containersToReset(containers []v1.Container, status *runtime.PodStatus) (sources, targets []containerToReset) {
	for i := range containers {
		c := &containers[i]
		for _, cs := range status.ContainerStatuses {
			if cs.Name != c.Name {
				continue
			}
			r := containerToReset{ID: cs.ID, Name: cs.Name, Container: c}
			switch {
			case cs.State != runtime.ContainerStateExited:
				r.Kill = true
				targets = append(targets, r)
			case podmodel.TriggersRestartAll(c, cs.ExitCode):
				sources = append(sources, r)
			default:
				targets = append(targets, r)
			}
		}
	}
	return sources, targets
}

// computeInitContainerActions is the kubelet's function of the same name:
// it adds to a the init containers to start (the next one not yet run,
// and every restartable init container (sidecar) that must run again) and
// the ones to kill, and reports whether the pod is initialized. Only the
// current sandbox's containers count. The init containers are walked from
// the last one back, since completed ones may have been removed from the
// runtime. A sidecar lets the next init container start once it runs and
// its startup probe (if any) succeeded; one that exited is restarted
// whatever the restart policy. A regular init container lets the next one
// start once it exited 0; a failed one is restarted per its restart rules
// and policy, or fails the pod (KillPod).
func computeInitContainerActions(pod *v1.Pod, status *runtime.PodStatus, opts SyncPodOptions, a *podActions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	initialized := runtime.HasAnyActiveRegularContainerStarted(pod, status)
	previouslyInitialized := initialized
	kill := func(i int, cs *runtime.ContainerStatus, reason killReason, message string) {
		a.ContainersToKill = append(a.ContainersToKill, containerToKill{
			ID: cs.ID, Name: cs.Name, Container: &inits[i], Reason: reason, Message: message,
		})
	}
	var toStart []int
	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := podmodel.IsRestartableInit(c)
		cs := status.FindActiveContainerStatusByName(c.Name)
		if cs == nil {
			// Gone after initialization: only sidecars run again.
			if previouslyInitialized && sidecar {
				toStart = append(toStart, i)
			}
			continue
		}
		if previouslyInitialized && !sidecar {
			continue
		}
		switch cs.State {
		case runtime.ContainerStateCreated:
			// Created but never started (the start failed): start it.
			toStart = append(toStart, i)
		case runtime.ContainerStateRunning:
			if !sidecar {
				break
			}
			if c.StartupProbe != nil {
				if unhealthy(opts, cs.ID) == "startup" {
					kill(i, cs, killStartup, fmt.Sprintf("Init container %s failed startup probe", c.Name))
					toStart = append(toStart, i)
					break
				}
				if !started(opts, cs.ID) {
					break // wait for the startup probe
				}
			}
			if i == len(inits)-1 {
				initialized = true
			} else if !previouslyInitialized {
				toStart = append(toStart, i+1)
			}
			if runtime.HashContainer(c) != cs.Hash {
				kill(i, cs, killSpecChanged, fmt.Sprintf("Init container %s definition changed", c.Name))
				toStart = append(toStart, i)
				break
			}
			if c.LivenessProbe != nil && unhealthy(opts, cs.ID) == "liveness" {
				kill(i, cs, killLiveness, fmt.Sprintf("Init container %s failed liveness probe", c.Name))
				toStart = append(toStart, i)
				break
			}
			// A running sidecar is resized as an app container is: in
			// place, or restarted when its resizePolicy asks.
			if runtime.ResizeAllowed(pod) && computeContainerResizeAction(c, cs, a) {
				toStart = append(toStart, i)
			}
		case runtime.ContainerStateExited:
			if sidecar {
				toStart = append(toStart, i)
				break
			}
			if isInitContainerFailed(cs) {
				if !runtime.ShouldContainerBeRestarted(c, pod, status) {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
				toStart = append(toStart, i)
				break
			}
			if i == len(inits)-1 {
				initialized = true
			} else {
				toStart = append(toStart, i+1)
			}
		default: // unknown
			if !sidecar {
				// No exit code: only the container's or the pod's policy.
				restart := shouldRestartOnFailure(pod)
				if c.RestartPolicy != nil {
					restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
				}
				if !restart {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
			}
			kill(i, cs, killUnknown, fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State))
			toStart = append(toStart, i)
		}
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		toStart = append(toStart, 0)
	}
	slices.Reverse(toStart)
	a.InitContainersToStart = append(a.InitContainersToStart, toStart...)
	return initialized
}
