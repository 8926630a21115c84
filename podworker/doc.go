// Package podworker gives every pod its own goroutine, the kubelet's pod
// workers.
//
// A worker moves its pod through three states: syncing (SyncPod is called
// until the pod should stop), terminating (SyncTerminatingPod is called until
// every container stopped) and terminated (SyncTerminatedPod releases what
// the pod held). Updates coalesce: while a sync runs, a newer update replaces
// any pending one, and the latest always wins. A pod that starts terminating
// cancels the sync in flight; its grace period can only shrink.
package podworker
