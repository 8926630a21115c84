package podruntime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/credentials"
)

// SyncPodOptions carry what other parts of the agent prepared for a pod.
type SyncPodOptions struct {
	// CgroupParent of the sandbox, as the cgroup manager returned it.
	// Defaults to "" (the runtime's choice).
	CgroupParent string
	// Mounts resolves a container's volumeMounts into host paths; the
	// volume manager provides it (volume.Manager.ContainerMounts), with
	// the checks host access needs (allowed paths, subPath escapes). A
	// container that mounts volumes when Mounts is nil fails with
	// ErrCreateContainerConfig.
	Mounts MountsFunc
	// Unhealthy, when set, reports running containers that failed their
	// liveness or startup probe (probe.Manager.Unhealthy); SyncPod kills
	// them and restarts them per the restart policy. Defaults to nil: no
	// probe results.
	Unhealthy UnhealthyFunc
	// HostIPs, when set, returns the node's addresses: the environment's
	// downward-API status.hostIP and status.hostIPs take them when the
	// pod's status has none yet, as the kubelet takes the node's.
	HostIPs func() []string
	// Started, when set, reports whether a running container's startup
	// probe succeeded (or it has none); a restartable init container
	// (sidecar) with a startup probe lets the next init container start
	// only then. Defaults to nil: every running container counts as
	// started.
	Started StartedFunc
	// RestartAllContainers: a container exited with a RestartAllContainers
	// rule (the pod's AllContainersRestarting condition is True). SyncPod
	// then only removes every container (stopping those still running) so
	// that the next sync starts the pod over in its sandbox; sync it again
	// when the result has removals (RemovedContainers).
	RestartAllContainers bool
	// PodCgroup, when set, is the pod's cgroup: a resize in place changes
	// its limits before or after the containers' (doPodResizeAction).
	// Defaults to nil: only the containers are resized.
	PodCgroup PodCgroup
	// CPUCFSQuotaPeriod is the CFS period of the pod's cgroup, which its
	// containers with a CPU limit share (the CRI cpu_period; the kubelet's
	// --cpu-cfs-quota-period): a limit allows its share of each period,
	// at least 1ms. Between 1ms and 1s; defaults to 100ms (also in place
	// of a value out of that range). The per-pod
	// sync gives the pod cgroup manager's
	// (cgroup.PodManagerOptions.CPUCFSQuotaPeriod), so that a pod and its
	// containers agree.
	CPUCFSQuotaPeriod time.Duration
}

// SyncPod brings the pod's sandbox and containers in the runtime towards
// its spec, as the kubelet's SyncPod does: kill the pod when its sandbox
// must be replaced, kill unwanted containers, create the sandbox, start the
// next init container or the app containers that should run (honouring the
// restart back-off and the image pull policy), and remove old exited
// instances beyond the newest two of each container. status must have been
// read after the previous SyncPod of the pod returned. It is
// SyncPodWithOptions with no options.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) SyncResult {
	return m.SyncPodWithOptions(ctx, pod, status, SyncPodOptions{})
}

// SyncPodWithOptions is SyncPod with the cgroup parent and volumes of the
// pod.
func (m *Manager) SyncPodWithOptions(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, opts SyncPodOptions) SyncResult {
	var result SyncResult
	pod = withHostIPs(pod, opts.HostIPs)
	if status == nil {
		status = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	log := m.log.WithValues("pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID)
	actions := computePodActions(pod, status, opts)
	if l := log.V(4); l.Enabled() {
		l.Info("computed pod actions", "actions", actions.String())
	}
	defer func() { m.recordReasons(pod.UID, result) }()
	if actions.CreateSandbox && actions.SandboxID != "" {
		m.ev.pod(pod, v1.EventTypeNormal, EventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
	}

	if actions.KillPod {
		if m.killPodForSync(ctx, pod, status, &result) != nil {
			return result
		}
		if actions.CreateSandbox {
			m.purgeInitContainers(ctx, pod, status, &result)
		}
	} else {
		for _, k := range actions.ContainersToKill {
			log.V(1).Info("killing container", "container", k.Name, "containerID", k.ID, "message", k.Message)
			err := m.stopContainer(ctx, pod, k.ID, k.Container, k.Reason, k.Message, nil, nil)
			result.add(ActionResult{Action: ActionKillContainer, Target: k.Name, Err: err})
			if err != nil {
				return result
			}
		}
		for _, r := range actions.ContainersToReset {
			log.V(1).Info("removing container before the pod restarts", "container", r.Name, "containerID", r.ID)
			if r.Kill {
				var zero int64
				if err := m.stopContainer(ctx, pod, r.ID, r.Container, killRestartAll, "killing", &zero, nil); err != nil {
					result.add(ActionResult{Action: ActionRemoveContainer, Target: r.Name, Err: err})
					return result
				}
			}
			if m.removeContainer(ctx, &runtime.ContainerStatus{ID: r.ID, Name: r.Name}, &result) != nil {
				return result
			}
		}
	}

	starting := map[string]bool{}
	for _, i := range actions.InitContainersToStart {
		starting[pod.Spec.InitContainers[i].Name] = true
	}
	for _, i := range actions.ContainersToStart {
		starting[pod.Spec.Containers[i].Name] = true
	}
	for _, i := range actions.EphemeralContainersToStart {
		starting[pod.Spec.EphemeralContainers[i].Name] = true
	}
	if !actions.CreateSandbox && len(actions.ContainersToReset) == 0 {
		m.pruneContainers(ctx, pod, status, starting, &result)
	}

	podIPs := status.IPs
	sandboxID := actions.SandboxID
	// The sandbox's config (which reads the host's resolver file for DNS)
	// is made only for a sandbox or container start: most syncs start
	// nothing.
	var sandboxCfg *runtimeapi.PodSandboxConfig
	// newLogDir: this sync made the pod's log directory, empty, so no
	// earlier instance of a container left a log in it.
	newLogDir := false
	if actions.CreateSandbox {
		cfg, warnings := m.sandboxConfig(pod, actions.Attempt, opts.CgroupParent)
		for _, w := range warnings {
			m.ev.pod(pod, v1.EventTypeWarning, w[0], w[1])
		}
		// New at a pod's first sandbox: one mkdir, where MkdirAll would
		// look at it and its parents first.
		madeLogDir := m.onDisk(func() error { return os.Mkdir(cfg.LogDirectory, 0o755) }) == nil
		newLogDir = madeLogDir
		if !madeLogDir {
			if err := m.onDisk(func() error { return os.MkdirAll(cfg.LogDirectory, 0o755) }); err != nil {
				// The runtime writes the logs; it reports its own error if
				// it cannot. An in-memory runtime does not need the
				// directory.
				log.Error(err, "cannot create pod log directory", "dir", cfg.LogDirectory)
			}
		}
		var id string
		handler, err := m.podRuntimeHandler(pod)
		if err == nil {
			err = m.setUserNamespace(ctx, pod, cfg, nil)
		}
		if err == nil {
			id, err = m.rs.RunPodSandbox(ctx, cfg, handler)
		}
		if err != nil {
			if madeLogDir && ctx.Err() != nil {
				// The start lost its race with the pod's deletion: the
				// directory it made goes too (empty, or kept). A
				// generation of pods deleted while starting does this at
				// once: within the bound on file work, or each holds a
				// thread.
				_ = m.onDisk(func() error { return os.Remove(cfg.LogDirectory) })
			}
			if pod.DeletionTimestamp == nil {
				// As the kubelet, no event for a pod being deleted: the
				// failure is likely its deletion's.
				m.ev.pod(pod, v1.EventTypeWarning, EventFailedCreatePodSandBox, "Failed to create pod sandbox: "+err.Error())
			}
			result.add(ActionResult{Action: ActionCreatePodSandbox, Target: podFullName(pod),
				Err: fmt.Errorf("%w: %w", ErrCreatePodSandbox, err), Message: err.Error()})
			return result
		}
		log.V(1).Info("created sandbox", "sandboxID", id, "attempt", actions.Attempt)
		defer func() {
			if ctx.Err() != nil && len(result.containers) == 0 && m.abandonSandbox(ctx, pod, id) && madeLogDir {
				_ = m.onDisk(func() error { return os.RemoveAll(cfg.LogDirectory) })
			}
		}()
		resp, err := m.rs.PodSandboxStatus(ctx, id, false)
		if err == nil && resp.GetStatus() == nil {
			err = errors.New("empty sandbox status")
		}
		if err != nil {
			m.ev.pod(pod, v1.EventTypeWarning, EventFailedPodSandBoxStatus, "Unable to get pod sandbox status: "+err.Error())
			result.add(ActionResult{Action: ActionCreatePodSandbox, Target: id,
				Err: fmt.Errorf("%w: status of new sandbox: %w", ErrCreatePodSandbox, err), Message: err.Error()})
			return result
		}
		result.add(ActionResult{Action: ActionCreatePodSandbox, Target: id})
		result.sandboxes = append(result.sandboxes, id)
		sandboxID = id
		// The containers are created with the config the sandbox was
		// created with, rather than one built again the same way (the
		// kubelet's SyncPod builds it again, which reads the resolver
		// file again and repeats its DNS warnings).
		sandboxCfg = cfg
		if !isHostNetwork(pod) {
			podIPs = runtime.SandboxIPs(resp.GetStatus())
		}
	}

	start := func(spec containerSpec) error {
		if sandboxCfg == nil {
			sandboxCfg, _ = m.sandboxConfig(pod, actions.Attempt, opts.CgroupParent)
		}
		spec.newLogDir = newLogDir
		ar, id := m.startContainer(ctx, pod, status, sandboxID, sandboxCfg, spec, podIPs, opts)
		result.add(ar)
		if id != "" {
			result.containers = append(result.containers, &runtimeapi.Container{Id: id, PodSandboxId: sandboxID})
		}
		if ar.Err != nil {
			log.V(1).Info("container start failed", "container", spec.container.Name, "err", ar.Err)
		}
		return ar.Err
	}
	// Ephemeral containers first, as the kubelet, so that one can debug
	// a pod whose init container fails to start; none in a sandbox this
	// sync stopped.
	if !actions.KillPod {
		for _, i := range actions.EphemeralContainersToStart {
			_ = start(ephemeralSpec(pod, i))
		}
	}
	for _, i := range actions.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		if start(containerSpec{container: c, index: i, typ: runtime.ContainerTypeInit}) != nil && !podmodel.IsRestartableInit(c) {
			return result
		}
	}
	if len(actions.ContainersToUpdate) > 0 || actions.UpdatePodResources {
		err := m.doPodResizeAction(ctx, pod, actions, opts.PodCgroup, cfsPeriodUS(opts))
		m.recordResize(pod.UID, err)
		ar := ActionResult{Action: ActionResizePod, Target: podFullName(pod), Err: err}
		if err != nil {
			ar.Message = err.Error()
			log.Error(err, "resizing pod in place")
		}
		// As the kubelet, the containers due still start.
		result.add(ar)
	}
	for _, i := range actions.ContainersToStart {
		_ = start(containerSpec{container: &pod.Spec.Containers[i], index: i, typ: runtime.ContainerTypeRegular})
	}
	return result
}

// killPodForSync stops the running containers and ready sandboxes of a pod
// SyncPod is about to restart (or that has nothing left to run). Exited
// containers and stopped sandboxes are left alone, so a second sync of a
// dead pod makes no call.
func (m *Manager) killPodForSync(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, result *SyncResult) error {
	running := runtime.RunningPod(status)
	var sandboxes []*runtime.Container
	for _, s := range running.Sandboxes {
		if s.State == runtime.ContainerStateRunning {
			sandboxes = append(sandboxes, s)
		}
	}
	running.Sandboxes = sandboxes
	return m.killPod(ctx, pod, running, nil, result)
}

// KillPod stops every container of running in parallel, each within its
// grace period, then stops the pod's sandboxes. The grace period is the
// pod's (deletion grace period, else spec.terminationGracePeriodSeconds;
// for an orphan, pod nil, the one recorded on the container), at least
// MinGracePeriod; gracePeriodOverride replaces it (a hard kill may go below
// the minimum). running nil means the pod's containers as the runtime
// reports them now (RunningPod of GetPodStatus). Stopping what is already
// gone is not an error.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, running *runtime.Pod, gracePeriodOverride *int64) error {
	if running == nil {
		if pod == nil {
			return errors.New("runtime: KillPod needs a pod or a running pod")
		}
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return err
		}
		running = runtime.RunningPod(st)
	}
	var result SyncResult
	return m.killPod(ctx, pod, running, gracePeriodOverride, &result)
}

func (m *Manager) killPod(ctx context.Context, pod *v1.Pod, running *runtime.Pod, override *int64, result *SyncResult) error {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		res []ActionResult
	)
	var stopping []*runtime.Container
	for _, c := range running.Containers {
		if c.State == runtime.ContainerStateRunning || c.State == runtime.ContainerStateUnknown || c.State == runtime.ContainerStateCreated {
			stopping = append(stopping, c)
		}
	}
	var order *terminationOrdering
	if pod != nil && hasRestartableInit(pod) {
		names := make([]string, len(stopping))
		for i, c := range stopping {
			names[i] = c.Name
		}
		order = newTerminationOrdering(pod, names)
	}
	// The containers stop at once, the last on this goroutine: a pod of
	// one container, the most common, makes none. Under churn every pod
	// deleted at once would otherwise hold a goroutine more while its
	// container stops, and the Go runtime keeps a descriptor of each
	// goroutine of the process's peak for as long as it runs.
	for i, c := range stopping {
		var spec *v1.Container
		if pod != nil {
			spec = findContainerSpec(pod, c.Name)
		}
		stop := func() {
			err := m.stopContainer(ctx, pod, c.ID, spec, "", "", override, order)
			mu.Lock()
			res = append(res, ActionResult{Action: ActionKillContainer, Target: c.Name, Err: err})
			mu.Unlock()
		}
		if i == len(stopping)-1 {
			stop()
		} else {
			wg.Go(stop)
		}
	}
	wg.Wait()
	slices.SortFunc(res, func(a, b ActionResult) int { return cmp.Compare(a.Target, b.Target) })
	for _, r := range res {
		result.add(r)
	}
	for _, s := range running.Sandboxes {
		err := m.rs.StopPodSandbox(ctx, s.ID)
		if err != nil && !runtime.IsNotFound(err) {
			result.add(ActionResult{Action: ActionKillPodSandbox, Target: s.ID, Err: fmt.Errorf("%w: %w", ErrKillPodSandbox, err)})
			continue
		}
		result.add(ActionResult{Action: ActionKillPodSandbox, Target: s.ID})
	}
	return result.Err()
}

// gracePeriod returns the seconds a container is given to stop.
func (m *Manager) gracePeriod(ctx context.Context, pod *v1.Pod, id string, spec *v1.Container, reason killReason, override *int64) int64 {
	if override != nil {
		return *override
	}
	var g int64
	switch {
	case pod != nil:
		g = terminationGracePeriod(pod)
		if pod.DeletionGracePeriodSeconds == nil && spec != nil {
			var p *v1.Probe
			switch reason {
			case killLiveness:
				p = spec.LivenessProbe
			case killStartup:
				p = spec.StartupProbe
			}
			if p != nil && p.TerminationGracePeriodSeconds != nil {
				g = *p.TerminationGracePeriodSeconds
			}
		}
	}
	minimum := int64((m.opts.MinGracePeriod + time.Second - 1) / time.Second)
	return max(g, minimum)
}

// stopContainer stops one container within its grace period, after
// recording a Killing event with message ("Stopping container <name>" when
// empty) when the container is in the pod's spec. With order, it first
// waits (within the grace period, which the wait shortens) for the
// containers that must stop before it.
func (m *Manager) stopContainer(ctx context.Context, pod *v1.Pod, id string, spec *v1.Container, reason killReason, message string, override *int64, order *terminationOrdering) error {
	if pod == nil {
		// An orphan: its grace period and preStop hook as recorded on it.
		pod, spec = m.restoreOrphan(ctx, id)
	}
	grace := m.gracePeriod(ctx, pod, id, spec, reason, override)
	if spec != nil {
		if message == "" {
			message = "Stopping container " + spec.Name
		}
		m.ev.container(pod, spec, id, v1.EventTypeNormal, EventKilling, message)
	}
	// The preStop hook's time, then the wait for the containers that stop
	// first, come out of the grace period, but the container keeps the
	// minimum to stop in (the kubelet's accounting).
	deducted := false
	if pod != nil && spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace > 0 {
		grace -= m.preStop(ctx, pod, spec, id, grace)
		deducted = true
	}
	if order != nil && spec != nil {
		if grace > 0 {
			grace -= order.waitForTurn(ctx, m.clock, spec.Name, grace)
		}
		deducted = true
		defer order.containerTerminated(spec.Name)
	}
	if deducted {
		grace = max(grace, int64((m.opts.MinGracePeriod+time.Second-1)/time.Second))
	}
	m.log.V(4).Info("stopping container", "containerID", id, "gracePeriod", grace)
	if err := m.rs.StopContainer(ctx, id, grace); err != nil && !runtime.IsNotFound(err) {
		return fmt.Errorf("%w: stop container %s: %w", ErrKillContainer, id, err)
	}
	return nil
}

// purgeInitContainers removes every instance of the init containers before
// a new sandbox is made, so initialization starts over in it.
func (m *Manager) purgeInitContainers(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, result *SyncResult) {
	inits := map[string]bool{}
	for i := range pod.Spec.InitContainers {
		inits[pod.Spec.InitContainers[i].Name] = true
	}
	for _, cs := range status.ContainerStatuses {
		if !inits[cs.Name] || cs.State == runtime.ContainerStateRunning {
			continue
		}
		m.removeContainer(ctx, cs, result)
	}
}

func (m *Manager) removeContainer(ctx context.Context, cs *runtime.ContainerStatus, result *SyncResult) error {
	err := m.rs.RemoveContainer(ctx, cs.ID)
	if err != nil && !runtime.IsNotFound(err) {
		err = fmt.Errorf("%w: remove container %s: %w", ErrRemoveContainer, cs.ID, err)
		result.add(ActionResult{Action: ActionRemoveContainer, Target: cs.Name, Err: err})
		return err
	}
	result.add(ActionResult{Action: ActionRemoveContainer, Target: cs.Name})
	return nil
}

// pruneContainers removes exited instances so that each container keeps at
// most its newest two (the current one and the previous one that the API
// status shows as lastState) counting the one about to start, and removes
// exited containers no longer in the spec.
func (m *Manager) pruneContainers(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, starting map[string]bool, result *SyncResult) {
	names := specContainerNames(pod)
	seen := map[string]int{}
	for _, cs := range status.ContainerStatuses { // newest first
		n := seen[cs.Name]
		seen[cs.Name] = n + 1
		keep := 2
		if starting[cs.Name] {
			keep = 1
		}
		if !names[cs.Name] {
			keep = 0
		}
		if n < keep || cs.State == runtime.ContainerStateRunning || cs.State == runtime.ContainerStateUnknown {
			continue
		}
		m.removeContainer(ctx, cs, result)
	}
}

// newestExited returns the newest exited instance of the container.
func newestExited(status *runtime.PodStatus, name string) *runtime.ContainerStatus {
	for _, cs := range status.ContainerStatuses {
		if cs.Name == name && cs.State == runtime.ContainerStateExited {
			return cs
		}
	}
	return nil
}

// previousExited returns the exited instance of the container that came
// before exited, nil when the runtime holds none.
func previousExited(status *runtime.PodStatus, exited *runtime.ContainerStatus) *runtime.ContainerStatus {
	for _, cs := range status.ContainerStatuses { // newest first
		if cs != exited && cs.Name == exited.Name && cs.State == runtime.ContainerStateExited && cs.RestartCount < exited.RestartCount {
			return cs
		}
	}
	return nil
}

// startContainer checks the restart back-off, ensures the image, and
// creates and starts one container instance. It returns the container's
// ID once the runtime created it.
func (m *Manager) startContainer(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, spec containerSpec, podIPs []string, opts SyncPodOptions) (ActionResult, string) {
	c := spec.container
	ar := ActionResult{Action: ActionStartContainer, Target: c.Name}
	if exited := newestExited(status, c.Name); exited != nil {
		key := c.Name
		now := m.now()
		m.mu.Lock()
		m.containerBO.seed(pod.UID, key, exited, previousExited(status, exited))
		in, delay := m.containerBO.inBackOffSince(pod.UID, key, exited.FinishedAt, now)
		if !in {
			ran := !exited.StartedAt.IsZero() && exited.FinishedAt.Sub(exited.StartedAt) >= m.opts.BackOff.Reset
			m.containerBO.next(pod.UID, key, exited.FinishedAt, ran)
		}
		m.gcBackOffsLocked(now)
		m.mu.Unlock()
		if in {
			m.ev.container(pod, c, "", v1.EventTypeWarning, EventBackOff,
				fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podFullName(pod)))
			ar.Message = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podFullName(pod))
			ar.Err = fmt.Errorf("%w: %s", ErrCrashLoopBackOff, ar.Message)
			ar.RetryAt = exited.FinishedAt.Add(delay)
			return ar, ""
		}
	}

	imageRef, msg, err := m.ensureImage(ctx, pod, c, sandboxCfg)
	if err != nil {
		m.ev.container(pod, c, "", v1.EventTypeWarning, EventFailed, "Error: "+Reason(err))
		ar.Err, ar.Message = err, msg
		if errors.Is(err, ErrImagePullBackOff) {
			m.mu.Lock()
			if e := m.imageBO.get(pod.UID, c.Image); e != nil {
				ar.RetryAt = e.last.Add(e.delay)
			}
			m.mu.Unlock()
		}
		return ar, ""
	}

	restartCount := 0
	// A newest instance that was created but never started (the agent
	// stopped between CreateContainer and StartContainer) never ran: it is
	// replaced, not restarted. Its replacement takes its restart count
	// (and so its attempt and log file), once it is removed.
	var neverStarted *runtime.ContainerStatus
	if prev := status.FindContainerStatusByName(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
		if prev.State == runtime.ContainerStateCreated && prev.StartedAt.IsZero() {
			neverStarted, restartCount = prev, prev.RestartCount
		}
	} else if !spec.newLogDir {
		restartCount = restartCountFromLogDir(runtime.PodLogsDirectory(m.opts.PodLogsDir, pod.Namespace, pod.Name, pod.UID) + "/" + c.Name)
	}
	// The target of an ephemeral container is looked up before the
	// container's config is made, as the kubelet.
	spec.targetID, err = ephemeralTargetID(spec.ephemeral, status)
	if err == nil {
		err = m.checkRunAsNonRoot(ctx, pod, c, imageRef)
	}
	var cfg *runtimeapi.ContainerConfig
	if err == nil {
		cfg, err = m.containerConfig(ctx, pod, spec, restartCount, imageRef, podIPs, opts.Mounts, cfsPeriodUS(opts))
	}
	if err == nil {
		// The sandbox's and every container's, as the kubelet's.
		err = m.setUserNamespace(ctx, pod, sandboxCfg, cfg)
	}
	if err != nil {
		m.ev.container(pod, c, "", v1.EventTypeWarning, EventFailed, "Error: "+err.Error())
		ar.Message = err.Error()
		ar.Err = fmt.Errorf("%w: %w", ErrCreateContainerConfig, err)
		return ar, ""
	}
	if neverStarted != nil {
		m.log.V(1).Info("removing a container created but never started", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", neverStarted.ID)
		if err := m.rs.RemoveContainer(ctx, neverStarted.ID); err != nil && !runtime.IsNotFound(err) {
			ar.Message = err.Error()
			ar.Err = fmt.Errorf("%w: remove container %s, created but never started: %w", ErrCreateContainer, neverStarted.ID, err)
			return ar, ""
		}
	}
	id, err := m.rs.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
	if err != nil {
		m.ev.container(pod, c, id, v1.EventTypeWarning, EventFailed, "Error: "+errorMessage(err))
		ar.Message = err.Error()
		ar.Err = fmt.Errorf("%w: %w", ErrCreateContainer, err)
		return ar, ""
	}
	m.ev.container(pod, c, id, v1.EventTypeNormal, EventCreated, "Created container: "+c.Name)
	if err := m.rs.StartContainer(ctx, id); err != nil {
		ar.Message = err.Error()
		ar.Err = fmt.Errorf("%w: start container %s: %w", ErrRunContainer, id, err)
		if ctx.Err() != nil {
			// The start lost its race with the pod's termination (or
			// the agent's stop): what it created goes, rather than stay
			// as a container that never ran.
			m.abandonContainer(ctx, pod, id)
			return ar, ""
		}
		m.ev.container(pod, c, id, v1.EventTypeWarning, EventFailed, "Error: "+errorMessage(err))
		return ar, id
	}
	m.ev.container(pod, c, id, v1.EventTypeNormal, EventStarted, "Started container "+c.Name)
	if msg, err := m.postStart(ctx, pod, c, id, podIPs); err != nil {
		ar.Message, ar.Err = msg, err
		return ar, id
	}
	m.log.V(1).Info("started container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", id, "restartCount", restartCount)
	return ar, id
}

// abandonTimeout bounds the clean-up of what a cancelled sync created.
const abandonTimeout = 30 * time.Second

// abandonContainer removes a container whose start was cancelled (its
// pod is terminating, or the agent stopping): the runtime stops whatever
// the start got running. ctx has ended; the removal has a context of its
// own. A failure is logged; housekeeping removes the containers of pods
// no source wants.
func (m *Manager) abandonContainer(ctx context.Context, pod *v1.Pod, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	if err := m.rs.RemoveContainer(ctx, id); err != nil && !runtime.IsNotFound(err) {
		m.log.Error(err, "cannot remove a container whose start was cancelled", "pod", podFullName(pod), "podUID", pod.UID, "containerID", id)
		return
	}
	m.log.V(1).Info("removed a container whose start was cancelled", "pod", podFullName(pod), "podUID", pod.UID, "containerID", id)
}

// abandonSandbox stops and removes a sandbox a cancelled sync created and
// started no container in, as abandonContainer; it reports whether the
// sandbox is gone.
func (m *Manager) abandonSandbox(ctx context.Context, pod *v1.Pod, id string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	err := m.rs.StopPodSandbox(ctx, id)
	if err == nil || runtime.IsNotFound(err) {
		err = m.rs.RemovePodSandbox(ctx, id)
	}
	if err != nil && !runtime.IsNotFound(err) {
		m.log.Error(err, "cannot remove a sandbox whose pod's start was cancelled", "pod", podFullName(pod), "podUID", pod.UID, "sandboxID", id)
		return false
	}
	m.log.V(1).Info("removed a sandbox whose pod's start was cancelled", "pod", podFullName(pod), "podUID", pod.UID, "sandboxID", id)
	return true
}

// gcBackOffsLocked drops stale back-off entries at most once a minute.
func (m *Manager) gcBackOffsLocked(now time.Time) {
	if now.Sub(m.lastBackOffGC) < time.Minute {
		return
	}
	m.lastBackOffGC = now
	m.containerBO.gc(now)
	m.imageBO.gc(now)
}

// ensureImage makes sure the container's image is present per its pull
// policy and returns the image reference to create the container from, or
// an error of class ErrImagePull, ErrImagePullBackOff, ErrImageNeverPull or
// ErrImageInspect with its message. An image present on the node that the
// Manager pulled with credentials the pod does not hold is pulled again
// with the pod's (pullRecords).
func (m *Manager) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (string, string, error) {
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image, RuntimeHandler: m.opts.RuntimeHandler, Annotations: pod.Annotations}
	policy := pullPolicy(c)
	// The pod's credentials, looked up once, when needed.
	creds := sync.OnceValues(func() ([]credentials.Credential, error) { return m.imageCredentials(ctx, pod, c.Image) })
	neverPull := func() (string, string, error) {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		m.ev.container(pod, c, "", v1.EventTypeWarning, EventErrImageNeverPull, msg)
		return "", msg, fmt.Errorf("%w: %s", ErrImageNeverPull, msg)
	}
	if policy != v1.PullAlways {
		resp, err := m.is.ImageStatus(ctx, spec, false)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err)
			m.ev.container(pod, c, "", v1.EventTypeWarning, EventInspectFailed, msg)
			return "", msg, fmt.Errorf("%w: %s", ErrImageInspect, msg)
		}
		if img := resp.GetImage(); img != nil {
			ref := img.GetId()
			if ref == "" {
				ref = c.Image
			}
			must, err := m.pulls.records.mustVerify(c.Image, ref, creds)
			if err != nil {
				return m.pullCredentialsFailed(pod, c, err)
			}
			if !must {
				m.ev.container(pod, c, "", v1.EventTypeNormal, EventPulled,
					fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", c.Image))
				return ref, "", nil
			}
			if policy == v1.PullNever {
				// As the kubelet: an image the pod may not use is absent
				// to it.
				return neverPull()
			}
		} else if policy == v1.PullNever {
			return neverPull()
		}
	}
	now := m.now()
	m.mu.Lock()
	in, _ := m.imageBO.inBackOffSinceUpdate(pod.UID, c.Image, now)
	m.mu.Unlock()
	if in {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		m.ev.container(pod, c, "", v1.EventTypeNormal, EventBackOff, msg)
		return "", msg, fmt.Errorf("%w: %s", ErrImagePullBackOff, msg)
	}
	auths, err := creds()
	if err != nil {
		return m.pullCredentialsFailed(pod, c, err)
	}
	m.ev.container(pod, c, "", v1.EventTypeNormal, EventPulling, fmt.Sprintf("Pulling image %q", c.Image))
	ref, _, err := m.pulls.pullWithCredentials(ctx, spec, auths, sandboxCfg)
	end := m.now()
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		m.ev.container(pod, c, "", v1.EventTypeWarning, EventFailed, msg)
		m.mu.Lock()
		m.imageBO.next(pod.UID, c.Image, end, false)
		m.mu.Unlock()
		return "", msg, fmt.Errorf("%w: %s", ErrImagePull, msg)
	}
	m.ev.container(pod, c, "", v1.EventTypeNormal, EventPulled,
		fmt.Sprintf("Successfully pulled image %q in %v", c.Image, end.Sub(now).Truncate(time.Millisecond)))
	m.mu.Lock()
	m.imageBO.remove(pod.UID, c.Image)
	m.mu.Unlock()
	if ref == "" {
		ref = c.Image
	}
	return ref, "", nil
}

// podRuntimeHandler is the runtime handler of the pod's sandbox:
// Options.PodRuntimeHandler's for a pod with a RuntimeClass, else
// Options.RuntimeHandler.
func (m *Manager) podRuntimeHandler(pod *v1.Pod) (string, error) {
	if m.opts.PodRuntimeHandler == nil || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return m.opts.RuntimeHandler, nil
	}
	return m.opts.PodRuntimeHandler(pod)
}

// defaultCFSPeriod is the CFS period when SyncPodOptions gives none: the
// kernel's and the kubelet's default.
const defaultCFSPeriod = 100 * time.Millisecond

// cfsPeriodUS is the sync's CFS period in microseconds.
func cfsPeriodUS(opts SyncPodOptions) int64 {
	if p := opts.CPUCFSQuotaPeriod; p >= time.Millisecond && p <= time.Second {
		return p.Microseconds()
	}
	return defaultCFSPeriod.Microseconds()
}
