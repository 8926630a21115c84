// Package status keeps the API status of every pod the agent runs and
// writes it to the API server: the kubelet's status manager.
//
// The Manager holds one v1.PodStatus per pod, versioned, merged with the
// kubelet's local rules (a terminal phase is final, the start time is
// kept, unchanged conditions keep their transition times), and tells an
// observer of each change. With a client, Run writes them:
//
//   - one writer goroutine; SetPodStatus marks the pod dirty and wakes it
//     through a channel of capacity 1, so any number of changes made
//     before it runs go out as one write, the latest. A resync every 10 s
//     writes what is still unwritten (failed writes) and what drifted;
//     while the Manager holds no pod's status it has nothing to resync
//     and its writer does not wake (the kubelet's ticks for nothing: a
//     thousand idle agents in one process woke 100 times a second);
//   - a pod start is one write. The kubelet writes a status in each pass
//     of its status manager: Pending when its first sync begins, then
//     Running after the PLEG saw the containers start, two writes when
//     they fall in different passes (nearly always, one relist apart).
//     Here the sync that starts a pod reads it back at its end, and holds
//     the pod's status meanwhile (Hold, podsync does), so that the
//     statuses of one sync go out as one write, the last: Running, or
//     Pending with its containers' waiting reasons when they did not
//     start. A hold lasts at most MaxHold (2s): a sync that takes longer
//     (an image pull) has its Pending status written then, as the
//     kubelet's would be;
//   - each write starts from the pod as last read or written, or as the
//     agent got it from the API server, and reads it when it has none (for
//     a static pod: its mirror pod, found by the static pod's name and
//     config.hash); it skips the pod if its UID changed (the pod was
//     replaced) or it is bound to another node, merges the
//     status held into the stored one (conditions the agent does not own
//     are kept; a terminal phase is held back while containers could still
//     run) and sends the difference as a strategic-merge PATCH of the
//     status subresource with the pod's UID and resource version as
//     preconditions, never a full update. A PATCH refused because the pod
//     changed is retried on the pod read again, so the merge always
//     applies to what it read;
//   - versions: the writer takes the newest version when it runs and
//     records the version written; an older status is never sent after a
//     newer one. A stored terminal phase is never replaced by a
//     non-terminal one, whoever wrote it;
//   - when a pod has a deletion timestamp, its containers cannot run any
//     more and its written status is terminal (or shows no running
//     container), the pod is deleted with grace period 0 and its UID as a
//     precondition, which completes a graceful deletion.
//
// # The API status
//
// Generate derives a pod's API status as the kubelet v1.37 (default
// feature gates) does, from the pod, its runtime status, the probe
// results, the last start failures and the previous API status
// (Input.Previous, the Manager's GetPodStatus; else the pod's own
// status). The phase counts a regular init container not yet succeeded as
// pending even beside app containers, judges initialization from the
// current sandbox, and follows the containers' restart policies and
// restartPolicyRules; a terminal phase stays. Restart counts never go
// down, a terminated state stays once the runtime forgot its container,
// a container that vanished while running shows terminated (or last
// terminated) with reason ContainerStatusUnknown and exit code 137, an
// init container missing once the pod was initialized shows Completed.
// PodReadyToStartContainers False carries reason PodSandboxNotReady and
// the kubelet's message; pods with a RestartAllContainers rule carry
// AllContainersRestarting. App container statuses are listed by name,
// init containers' in spec order, as the kubelet lists them. Ephemeral
// containers (kubectl debug) have theirs in ephemeralContainerStatuses,
// by name, converted as app containers' (Waiting, Running, Terminated),
// never Ready nor Started, and counted in neither the phase nor the
// conditions.
//
// In-place resize (InPlacePodVerticalScaling, on in 1.37; the status.resize
// field is gone): Input.Pod carries the resources allocated to the pod,
// which each container status reports as allocatedResources (its
// requests); a running container's resources are the CPU and memory the
// runtime reports (memory requests as allocated, values at or below the
// kubelet's minimums as allocated). PodResizeInProgress is True while a
// running app container's or sidecar's reported resources differ from its
// allocation, or, for a pod with pod-level resources
// (InPlacePodLevelResourcesVerticalScaling), while its cgroup as read
// (Input.PodCgroup) differs from them. Every pod, with pod-level
// resources or not, reports its requests (containers aggregated,
// pod-level requests in their place, overhead added) as
// status.allocatedResources. As status.resources, a pod not Running
// reports spec.resources with those requests and the aggregated limits;
// a Running pod reports spec.resources alone (pod-level only: no limit a
// container lacks, no ephemeral-storage nor extended resources) with its
// cgroup's cpu request (kept as allocated when the cgroup v2 weight only
// rounds the pod-level request: the kubelet's lossy v2 round trip, which
// for a pod without pod-level resources is that of no request, so that a
// 50m container request reads back as 28m), the aggregated memory request
// when spec.resources has none, the cgroup's cpu limit and memory limit;
// a value the cgroup lacks or could not be read is the previous status's
// when that was Running too, else left out, as the kubelet v1.37.2's
// convertToAPIPodLevelResourcesStatus. Without a pod cgroup
// (Input.PodCgroup nil: an agent with cgroups off) a Running pod reports
// its allocated requests and limits, which nothing else enforces. The
// condition comes with reason
// Error and the runtime's message when the last attempt failed
// (ResizeErrors, found on Input.Waiting); PodResizePending is
// Input.ResizePending (Infeasible or Deferred, podmodel.DecideResize). The
// Manager clears both in the API server by leaving them out, as the
// kubelet's status merge does.
//
// Where Generate differs on purpose: a pod stopped for good
// (Input.Terminal) whose phase would not be terminal (its containers
// never ran) is Failed, so that it never stays Pending; a Started flag is
// carried from the previous status only for the same container instance
// (the kubelet carries it to a new instance until the probes run); the
// phase's reason and message are not carried over while the phase stays
// (the agent sets its own, such as FailedMount, which must clear); a
// resize of pod-level resources is in progress while the pod cgroup as
// read differs from the allocation (the kubelet compares its record of the
// pod-level resources last actuated: the cgroup is what the pod runs
// with, and needs no record kept); on cgroup v1 a memory limit of
// "unlimited" (above 2^62) reads as none, where the kubelet reports the
// kernel's largest value.
//
// # Usage
//
//	m := status.NewManager(status.Options{
//		Client:    client,
//		NodeName:  node,
//		MirrorPod: mirrors.MirrorPod,
//		Logger:    log,
//	})
//	go m.Run(ctx)
//	m.SetPodStatus(pod, status)
//	...
//	m.PodTerminated(pod.UID) // its containers stopped: podworker.Options.Terminated
//
// # Concurrency
//
// Manager is safe for concurrent use. The observer is called without the
// manager's lock held, in the order of the changes of each pod. The
// functions in Options are called with the lock held and must not call
// back into the Manager. SetPodStatus never waits for the API server.
// The statuses GetPodStatus returns, and the observer is given, share
// their slices and pointers with the status held (and equal condition
// lists with other pods' statuses): treat them as read-only.
//
// # Errors
//
// API errors are logged and the pod is written again at the next resync;
// an API server that does not answer ends the writer's run early, leaving
// the remaining pods to the next resync. While the errors last, each line
// (the API server's, each pod's) is logged once, then at most once a
// minute with the count of those not logged ("suppressed"). Stats counts the requests.
package status
