// Package podworker gives every pod its own goroutine, the kubelet's pod
// workers, while the pod has work.
//
// A worker moves its pod through three states: syncing (SyncPod is called
// until the pod should stop), terminating (SyncTerminatingPod is called until
// every container stopped) and terminated (SyncTerminatedPod releases what
// the pod held). Updates coalesce: while a sync runs, a newer update replaces
// any pending one, and the latest always wins. A pod that starts terminating
// cancels the sync in flight; its grace period can only shrink.
//
// # Usage
//
//	queue := podworker.NewQueue()
//	workers, err := podworker.New(handler, podworker.Options{Cache: cache, Queue: queue})
//	go workers.Run(ctx)
//
//	// the sync loop, for every pod change and every second for due pods:
//	workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})
//	for _, uid := range queue.GetWork() { /* UpdatePod(SyncPodSync) for that pod */ }
//	// housekeeping, every two seconds:
//	known := workers.SyncKnownPods(desiredPods)
//
// # Lifecycle of a pod
//
// A pod starts terminating when a SyncPodKill arrives, when it gets a
// deletionTimestamp, when its status phase is Succeeded or Failed, when
// SyncPod returns isTerminal, when a kill for a RunningPod (an orphan found
// in the runtime) arrives, or when SyncKnownPods finds it no longer desired.
// The sync in flight is then cancelled through its context.
//
// The grace period is the kubelet's: the spec's
// terminationGracePeriodSeconds, replaced by deletionGracePeriodSeconds or
// by a kill's PodTerminationGracePeriodSecondsOverride when those are
// shorter, at least 1 second. Once the pod terminates it never grows; a
// shorter one cancels SyncTerminatingPod and calls it again. The status
// functions of every kill apply in order (later kills override earlier
// ones) in the function passed to SyncTerminatingPod. Updates of a
// terminating pod replace the pod object the worker passes on, and the pod
// keeps terminating.
//
// After SyncTerminatingPod returns nil, the kills' CompletedCh channels
// close and SyncTerminatedPod runs at once; once it returns nil the worker
// is finished and its goroutine exits. A finished UID ignores every update
// (a kill's CompletedCh still closes) until SyncKnownPods forgets it, after
// which the same UID starts afresh. A create for a terminating UID marks it
// to be forgotten as soon as it finished, even while still desired. A pod
// known only from the runtime is forgotten as soon as it stopped.
//
// A pod first seen with phase Succeeded or Failed whose cached runtime
// status shows nothing running (an agent restart) starts terminated: only
// SyncTerminatedPod is called.
//
// Static pods (the kubernetes.io/config.source annotation present and not
// "api") with the same namespace/name start one after the other, in the
// order first seen: a new UID does not sync until the UID holding the name
// finished (SyncTerminatedPod returned nil). Editing a static pod's manifest
// changes its UID, so this is what makes "old replaced by new" safe. A
// static pod killed before it started is finished without any sync.
//
// # Timing
//
// Before each SyncPod, SyncTerminatingPod or SyncTerminatedPod the worker
// reads the pod's status with Cache.GetNewerThan(ctx, uid, lastSync), where
// lastSync is when the worker's previous sync of the pod returned (zero at
// first), as in the kubelet: a status the worker acts on was read after
// everything its previous sync did. A SyncPod due because a Queue.Wake
// fired (a pod's active deadline) takes the status held at once: what is
// due is a matter of time, and the status is as new as the worker's last
// action.
//
// After a successful SyncPod the pod is due in the Queue after
// ResyncInterval, after a failed sync after BackOffPeriod, each plus a
// random 0 to 50% (the kubelet's wait.Jitter). Moving to terminating or
// terminated does not wait for the queue. Retries of a failed
// SyncTerminatingPod or SyncTerminatedPod come from the sync loop's
// SyncPodSync for the due pod, or, for a pod no longer desired, from
// SyncKnownPods.
//
// The Queue keeps its pods in a min-heap by due time: GetWork costs
// O(k log n) for k due pods out of n and next to nothing when none is due,
// where the kubelet's queue walks every pod on each poll. An idle node
// with many pods pays nothing for the sync loop's poll every second.
//
// # Concurrency
//
// Workers is safe for concurrent use. Every call for one pod UID happens on
// that pod's goroutine, one at a time. UpdatePod never waits for a sync.
// Unlike the kubelet's, whose worker goroutine lives as long as its pod, a
// pod's goroutine ends when no update is pending and the next update
// starts a new one: an idle pod holds no goroutine and no stack (a sync's
// deep calls would otherwise keep kilobytes of stack for each pod). Nor
// does it hold a channel, timer or context: a settled pod costs one
// allocation for its worker and state, the update it last acted on, and
// its entries in the workers' map and in the Queue
// (BenchmarkSettledPodHeap).
// UpdatePod before Run keeps the update; the pod's worker starts when Run
// starts. Run returns after every worker goroutine exited; after that
// UpdatePod does nothing (logged at V(4)) while SyncKnownPods and the
// queries keep answering. Ending Run stops the workers, never the pods: a
// restarting agent finds them running. Run cancels the syncs in flight; a
// sync that ignores its context holds Run until it returns.
//
// The pure core (state.go) holds one pod's state and its transitions as
// deterministic functions that take the time as an argument; the shell
// (workers.go) adds the lock, the goroutines, the contexts and the calls.
//
// # Errors
//
// A failed sync is logged with the pod (namespace/name) and its UID, and
// retried after the back-off period. A pod whose syncs keep failing is
// logged once, then at most once a minute, with the count of the failures
// not logged ("suppressed"); each pod apart. SyncFuncs implementations return
// ctx.Err() when their context is cancelled; such a return is not an error.
package podworker
