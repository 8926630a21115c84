// Package podruntime holds the pod-level runtime manager: Manager turns a
// v1.Pod into sandbox and container operations on a runtime.RuntimeService
// and runtime.ImageService the way the kubelet's kuberuntime manager does
// (computing the actions of a sync, starting, killing and restarting
// containers with their back-off, pulling images with their credentials,
// DNS, /etc/hosts, lifecycle hooks, security contexts and user namespaces,
// in-place resize, termination messages, ephemeral containers), and reads
// each pod's runtime.PodStatus back. The interfaces and the runtime's view
// of pods are package runtime's; this package adds what a pod sync does
// with them.
//
// # Usage
//
//	rt := runtimetest.New(runtimetest.Options{})
//	m, err := podruntime.New(rt, rt, podruntime.Options{})
//	...
//	status, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
//	result := m.SyncPod(ctx, pod, status)
//
// # Replacing it
//
// The agent (package nodekit) uses the Manager through the methods its
// per-pod sync calls (podsync.PodRuntime): RuntimeName, GetPodStatus,
// SyncPodWithOptions, KillPod and WaitingReason (status.WaitingReasons),
// and PodStatusAfterSync when present. Any type with those methods
// replaces it there; the PLEG asks for GetPodStatus (pleg.StatusGetter)
// and, with the runtime's events, PodStatusFromEvent. Build a
// runtime.PodStatus with its AddSandboxStatus and AddContainerStatus, so
// that the order of its sandboxes and containers is the one every reader
// expects.
//
// # The Manager
//
// Manager follows the kubelet's kuberuntime manager (v1.37, default
// feature gates). SyncPod computes the actions as computePodActions does (a
// new sandbox when there is none, it is not ready, several are ready, the
// host-network mode changed or a pod-network sandbox has no IP; under
// restartPolicy Never a sandbox whose containers ran is not recreated),
// then kills what must go (the whole pod before a new sandbox; containers
// whose spec hash changed, that failed a liveness or startup probe, that
// are in an unknown state or that are no longer in the spec), creates the
// sandbox and starts the init and app containers due.
//
// Initialization is judged from the current sandbox's containers only
// (runtime.PodStatus.FindActiveContainerStatusByName), walking the init containers
// from the last one back: a regular init container must exit 0 before the
// next one starts; a restartable init container (sidecar) lets the next
// one start once it runs and its startup probe succeeded
// (SyncPodOptions.Started), and the app containers start in the sync that
// sees the last init container done. Every sidecar that is not running is
// started again in the same sync, before and after initialization. Whether
// an exited container restarts follows its restartPolicyRules (first
// match), then its own restartPolicy, then the pod's
// (podmodel.ContainerShouldRestart); a probe failure restarts it per its
// own policy, else the pod's. With SyncPodOptions.RestartAllContainers (a
// container exited with a RestartAllContainers rule), SyncPod removes
// every container, stopping running ones at once, the triggering ones last,
// and the next sync starts the pod over in the same sandbox.
//
// KillPod stops a pod with sidecars in the kubelet's order: the app
// containers first, all at once, then the sidecars in reverse order, each
// waiting at most its grace period (which the wait shortens) for those
// before it.
//
// Each container start waits out the restart back-off (10s doubling to
// 300s, reset after 10m; key: pod UID and container name), ensures the image per imagePullPolicy (failed pulls back
// off 10s to 300s per pod and image), and records the restart count in the
// container's annotations so it survives a restart of the agent. The
// restart back-off survives it too: a Manager that finds an exited
// container it holds no back-off for takes it from what the runtime
// records (the restart count and the exit times of the two newest
// instances), so a container at 300s waits out its 300s after a restart;
// the kubelet forgets it and restarts the container at once. At most
// the two newest instances of each container are kept (the current one and
// the previous one shown as lastState). Pass SyncPod a status read after the
// previous SyncPod of the pod returned: it is then idempotent.
//
// The Manager derives no API status: status.Generate does, from a
// PodStatus, the Manager's WaitingReason of each container (the reason of
// its last failed start) and the probe results.
// runtime.PodSandboxChanged (with the kubelet's message),
// runtime.ShouldContainerBeRestarted,
// runtime.HasAnyActiveRegularContainerStarted and
// runtime.HasAnyRegularContainerCreated are the decisions of SyncPod that
// the API status shows.
//
// # Events
//
// With Options.Recorder set (any client-go record.EventRecorder),
// the Manager records the kubelet's events, with its reasons, types and
// messages, on the pod with the container's field path
// (spec.containers{name}, spec.initContainers{name}): Pulling, Pulled
// ("Container image "x" already present on machine and can be
// accessed by the pod", "Successfully pulled
// image "x" in 1.2s"), Failed ("Failed to pull image ...", then "Error:
// ErrImagePull"; "Error: <runtime message>" when a container cannot be
// configured, created or started), BackOff (image pull, Normal; restart,
// Warning: "Back-off restarting failed container c in pod name_ns(uid)"),
// InspectFailed, ErrImageNeverPull, Created ("Created container: c"),
// Started ("Started container c"), Killing ("Stopping container c", or why
// SyncPod stops it: "Container c failed liveness probe, will be
// restarted"); and on the pod itself SandboxChanged, FailedCreatePodSandBox
// (not for a pod being deleted) and FailedPodSandBoxStatus. Orphans (KillPod
// without a pod) and containers no longer in the spec get no events, as
// with the kubelet. The Pulled message of a pull leaves out the kubelet's
// "(… including waiting). Image size: … bytes." (the Manager does not ask
// the image's size).
//
// # Image pulls
//
// The pods that need an image at the same time share one PullImage call
// (keyed by image, runtime handler and credentials), and at most
// Options.MaxParallelImagePulls images are pulled at once: 1 by
// default, the kubelet's serialized pulls. A shared pull is cancelled only
// when no pod waits for it any more.
//
// Differences from the kubelet, each on purpose and with its reason, and
// the rules this package follows where a reader might expect otherwise:
//   - Probes are not run here. SyncPodOptions.Unhealthy tells SyncPod which
//     containers failed their liveness or startup probe.
//   - A container whose newest instance was created but never started
//     (the agent stopped between CreateContainer and StartContainer) is
//     started as the kubelet does, as a new instance, but that instance
//     takes the never-started one's restart count, attempt and log file,
//     and the never-started one is removed first: the container never ran,
//     so it shows no restart. The kubelet (v1.37 startContainer) gives the
//     new instance the created one's count plus one and leaves the created
//     one to the container GC, so it reports "restarts: 1" for a container
//     that never ran. An instance that started and exited counts, as in
//     the kubelet.
//   - A container's command and args are expanded within bounds (the
//     kubelet sets none): 1 MiB for each element and 8 MiB for the command
//     line, above what the kernel's execve takes. Past either, the start
//     fails with ErrCreateContainerConfig and a message that names the
//     element ("command[2]: too long: ..."); the expansion stops as soon as
//     a bound is crossed, so a $(VAR) bomb never builds its string.
//   - A grace period override below the minimum (2s) is kept, also when
//     the termination order made the container wait: the kubelet raises
//     every grace period to 2s, nodekit lets a caller force a hard kill.
//   - Ephemeral containers (kubectl debug) are the kubelet's: started,
//     before the init and app containers, when they have no instance in
//     any sandbox; never restarted, never probed; stopped with the pod;
//     a targetContainerName puts them in that container's PID namespace
//     (CRI NamespaceMode TARGET) unless the pod shares one already. On
//     purpose, SyncPod does not start one in a sandbox it has just stopped
//     (the kubelet tries, and fails to create it there).
//   - In-place resize is the kubelet's (InPlacePodVerticalScaling and
//     InPlacePodVerticalScalingInitContainers, both locked on in 1.37):
//     SyncPod compares each running app container's and restartable init
//     container's (sidecar's) resources as the runtime reports them (CRI
//     ContainerStatus resources) with its spec, which the agent sets to
//     the allocated resources, and, as computePodResizeAction and
//     doPodResizeAction do, restarts the container when a changed
//     resource's resizePolicy is RestartContainer (a sidecar as an init
//     container), else updates it in place: memory then CPU, each with the
//     pod cgroup (SyncPodOptions.PodCgroup) raised before the containers
//     or lowered after them, decreases before increases, one
//     UpdateContainerResources per container and resource; a failure is
//     ErrResizePodInPlace and Manager.ResizeError. On purpose: the actual
//     resources are the runtime's report, not the kubelet's checkpoint of
//     what UpdateContainerResources accepted, so that PodResizeInProgress
//     and ResizeCompleted wait until the runtime shows the new values (a
//     runtime that reports none is not resized in place; its containers
//     take the allocation when they start); a running regular init
//     container keeps its resources until it exits, its next start taking
//     the allocation, since it runs to completion before any app container
//     (the API server takes such a resize only for a Node that declares
//     InPlacePodVerticalScalingInitContainers). A resize of the pod-level
//     resources (spec.resources, InPlacePodLevelResourcesVerticalScaling,
//     beta and on since 1.36; the agent's Node declares it, which the API
//     server requires of such a resize) is the kubelet's too: allocated
//     against the node as a container's (the pod-level requests are the
//     pod's), and,
//     while the pod cgroup's cpu shares, CFS quota or memory limit differ
//     from those the pod-level resources give it, SyncPod moves the pod
//     cgroup to them with the containers' updates in the same order
//     (raised before the containers, lowered after), restarting no
//     container for it (resizePolicy is a container's field, applied to
//     the containers' own changes). PodResizeInProgress holds until the
//     pod cgroup, as read, has them. status.allocatedResources and
//     status.resources are filled for every pod, with pod-level resources
//     or not, as the kubelet v1.37.2's convertStatusToAPIStatus and
//     convertToAPIPodLevelResourcesStatus fill them: the pod's requests
//     (containers aggregated, pod-level requests in their place, overhead
//     added); for a pod not Running, spec.resources with the aggregated
//     requests and limits; for a pod Running as its source gives it,
//     spec.resources alone (pod-level) with the cgroup's cpu request (the
//     pod-level request where the cgroup's shares are its lossy cgroup v2
//     round trip; without pod-level resources that of no request, so a
//     50m container request reads back as 28m), the aggregated memory
//     request when spec.resources has none, and the cgroup's cpu limit
//     and memory limit, a value the cgroup lacks or could not be read
//     being the previous Running status's (an agent with cgroups off,
//     which has no pod cgroup, reports the allocated requests and limits
//     of a Running pod too: nothing enforces other values). The status
//     reads only the
//     cgroup's cpu files and memory limit, as the kubelet's
//     GetPodCgroupConfig (cgroup.PodManager.PodStatusConfig). On purpose,
//     as for containers: a resize of the pod-level resources is in
//     progress while the pod cgroup as read differs from the allocation,
//     not the kubelet's checkpoint of what was written (cpu shares compare
//     as cgroup v2 weights, the value cgroup v2 keeps); on cgroup v1 an
//     unlimited memory limit reads as none, not as the kernel's largest
//     value.
//   - Image pull secrets (Options.Secrets; package
//     runtime/credentials has the docker-config rules) are read when an
//     image is pulled or its access checked, not at every sync: the
//     FailedToRetrieveImagePullSecret event comes with a pull. A malformed
//     docker config fails the pull with ErrImagePull and a message naming
//     the Secret, and backs off as a failed pull (the kubelet fails with
//     the JSON error as the reason, without back-off). The node's logins
//     (Options.NodeCredentials: the kubelet's node docker config
//     files and credential-provider plugins, package runtime/credentials)
//     are read at the pull, as the kubelet's. The image pull
//     credential verification (KubeletEnsureSecretPulledImages, on by
//     default since 1.35) follows its default policy,
//     NeverVerifyPreloadedImages, with its records in
//     <RootDir>/image_manager/pulled.json (in memory without a RootDir or
//     with Options.NoPullRecordsFile):
//     the pulls under way are written there too (an image whose pull a
//     restart of the agent cut short is not taken as preloaded), and the
//     records of images no longer present are pruned after each listing of
//     the image garbage collector (Manager.PruneImageRecords). The kubelet
//     keeps one file per record; nodekit one file for all, rewritten at
//     each change (pulls are rare, and one file is one write).
//   - The security context goes to CRI as the kubelet sends it (users and
//     groups, the supplemental groups policy, capabilities, privileged,
//     read-only root, no-new-privileges, seccomp with Localhost profiles
//     under <RootDir>/seccomp, AppArmor, SELinux options, procMount's
//     masked and read-only paths, sysctls). User namespaces are the
//     kubelet's (UserNamespacesSupport, on by default): with
//     Options.UserNamespaces (the agent gives package userns's
//     manager), the sandbox and every container of a pod get its user
//     namespace in their namespace options, as namespacesForPod does:
//     mode NODE, or for hostUsers: false mode POD with the pod's own ID
//     mappings, asked for the pod's runtime handler, every mount of its
//     containers idmapped with those mappings (CRI Mount uidMappings and
//     gidMappings, as the kubelet's applyPlatformSpecificContainerConfig);
//     a failure (a handler that does not report the UserNamespaces
//     feature, the ID range used up, hostNetwork/hostPID/hostIPC with
//     hostUsers: false) fails the sandbox with FailedCreatePodSandBox and
//     the kubelet's message. A static pod with hostUsers: false and a
//     host namespace is refused at its source (sources.ValidateStatic),
//     as the API server refuses such a pod.
//     Without it, a hostUsers: false pod fails with ErrUserNamespaces.
//     Package userns lists where its allocation differs on purpose (no ID
//     range reaching 2^32-1; a bad mapping file fails its pod only).
//   - A container killed without its pod (an orphan after a restart of the
//     agent) gets its preStop hook and grace period as the kubelet: both
//     are recorded on the container (AnnotationPreStopHandler, with its
//     ports in AnnotationContainerPorts for a named httpGet port, and
//     AnnotationPodTerminationGracePeriod) and read back to stop it.
//     Neither its Killing nor its hook events are recorded (the kubelet's
//     cannot be either: the pod is gone).
//   - The environment is resolved by Options.Env (package env):
//     every source the kubelet serves, service links included when it is
//     given the cluster's Services (the Agent gives an informer's when
//     joined to a cluster); ConfigMaps and Secrets come from the getter
//     given to it. Mounts come from SyncPodOptions.Mounts.
//   - DNS (Options.DNS) follows the kubelet's dnsPolicy rules and
//     limits, with two deliberate differences: a ClusterFirst pod on an
//     agent with neither cluster DNS servers nor a cluster domain (a
//     standalone agent) gets the host's settings without the kubelet's
//     MissingClusterDNS warning at every pod; an unreadable host resolver
//     file is logged and treated as empty instead of failing the sandbox.
//     DNS options merged from the host and the pod keep their first order
//     (the kubelet's is a map's). The host resolver file is parsed once
//     and again only when its size, modification time or inode changes
//     (a stat per sandbox), where the kubelet reads and parses it for
//     every sandbox.
//   - The managed /etc/hosts (with RootDir) is the kubelet's file; it is
//     written at each container start, as the kubelet does.
//   - Old stopped sandboxes of a running pod are left to package gc (the
//     agent runs its collector); RemovePod removes them with the pod.
//   - After a sync that changed a pod, the agent reads the pod back at
//     once (podsync.Syncer), where the kubelet waits for its PLEG to
//     report the change (its next relist, up to a second later): a pod's
//     status shows the start of its containers as soon as they started.
//     That read (PodStatusAfterSync) does not list the pod's sandboxes
//     and containers, as GetPodStatus does: it reads those the status
//     the sync started from holds and those the sync created, which are
//     all the pod has (only its syncs create them), so that a pod's first
//     start costs two status calls to read back rather than four. A sync
//     with a failed step, which may have left an object it does not
//     know, reads the pod with GetPodStatus. While the runtime's events
//     bring the pods' statuses (pleg.Evented.StreamsStatuses), a sync
//     that only started sandboxes and containers reads nothing: it waits
//     for the status their events bring (SyncResult.OnlyStarts,
//     SyncResult.ShownIn), up to 10 s, then reads the pod after all, so
//     that a pod's first start costs one status call, for its sandbox's
//     IPs (the kubelet's SyncPod makes that call too; its relisting PLEG
//     then reads the pod at its next relist, its evented PLEG builds the
//     status from the events as here). The agent learns that the events
//     bring statuses from the first ones that do: the pods started before
//     are read back.
//   - Options.MaxParallelStatusReads, when set, bounds the
//     GetPodStatus calls reading from the runtime at once (the others wait
//     their turn, or their context, before sending anything). The kubelet
//     has no such bound, and it is off by default: it trades CPU for
//     memory (fewer calls held in memory in a burst of pods, so a smaller
//     heap left fragmented after it; see the field).
//
// # Hooks and termination messages
//
// As the kubelet: a container's postStart hook (exec through ExecSync,
// httpGet to the pod's IP, sleep) runs right after it started, on the
// caller's goroutine and bounded by its context; a failure records
// FailedPostStartHook ("PostStartHook failed"), kills the container and
// fails the start with ErrPostStartHook (waiting reason
// PostStartHookError, the hook's message). A preStop hook runs before
// StopContainer, within the grace period, whose whole seconds it took
// are deducted (the container keeps MinGracePeriod at least); a hook that
// outlives the grace period is cancelled; a failure records
// FailedPreStopHook. With Options.RootDir, a container's
// terminationMessagePath is a file of the pod's directory; the last 4 KiB
// of it become the message of the exited container's status, or, under
// FallbackToLogsOnError for a failed container with an empty file, the
// last 80 lines (at most 2 KiB) of its log.
//
// # Concurrency
//
// Manager is safe for concurrent use; callers (the pod workers) serialise the
// work on any one pod.
//
// # Errors
//
// Errors from the runtime are wrapped with the operation and the object
// they concern; SyncPod reports one error per failed action in its result.
// Each failed start belongs to a class (ErrCrashLoopBackOff, ErrImagePull,
// ErrImagePullBackOff, ErrImageNeverPull, ErrCreateContainerConfig,
// ErrCreateContainer, ErrRunContainer, ...) that errors.Is recognises and
// whose name, from Reason, is the container's waiting reason. A result that
// OnlyBackOff is not a failure of the sync: retry it at NextRetry.
// IsNotFound recognises the runtime's "no such object" errors (ErrNotFound,
// gRPC NotFound).
package podruntime
