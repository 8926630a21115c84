// Package apiserver is the pod source that watches the API server for the
// pods bound to this node, the kubelet's API-server source.
//
// A client-go reflector lists and watches pods with the field selector
// spec.nodeName=<node> into a store of its own; every change to the store
// sends the complete store as a snapshot to the merge in package sources
// (under the name sources.APIServerSource), which turns snapshots into
// ADD, UPDATE, DELETE, REMOVE and RECONCILE. The first snapshot follows the
// first complete list and marks the source ready. Bursts of changes are
// coalesced: at most one snapshot per Options.MinInterval.
//
// Source.Pods reads the store itself, without waiting for a snapshot and
// without a request: the pods the watch holds now and whether the first
// list completed. The mirror pod manager takes the node's pods from it
// (mirror.Options.Pods) instead of listing them at every housekeeping.
//
// The pods the store holds, and so those Pods returns and the snapshots
// send, lack their metadata.managedFields: nothing in the agent reads
// them, and they are about a third of a running pod's object (the
// creator's and the agent's own server-side apply records). They are
// dropped as each pod is decoded, before any store holds it.
//
// # Usage
//
//	src, err := apiserver.New(client, node, apiserver.Options{Logger: log})
//	if err != nil { ... }
//	cfg.Add(sources.APIServerSource, src)
//	mirrors, err := mirror.New(client, mirror.Options{NodeName: node, Pods: src.Pods, ...})
//
// # Checkpoint
//
// With Options.CheckpointPath set (the nodekit agent sets
// <RootDir>/checkpoints/apiserver-pods.json), the pods of every snapshot
// are written to that file, atomically and before the snapshot is sent,
// whenever something other than their status changed. A Run whose first
// list has not completed within Options.CheckpointGrace (3s) sends the
// checkpoint's pods as its first snapshot, so an agent restarted while the
// API server is unreachable keeps running the API pods it ran; the first
// list then replaces them with what the server says, which is when a pod
// deleted meanwhile is removed. A pod is never removed on the checkpoint's
// word alone unless the server said it was gone before the restart: a pod
// the agent runs is always in the checkpoint. A checkpoint that cannot be
// written is removed (and the failure logged), so that a stale one is never
// used; one of another node, another format or that does not decode is
// ignored with an error, and the source waits for the server as without a
// checkpoint. The kubelet has no such checkpoint: restarted without its
// API server it runs no API pod until the server answers.
//
// # Errors
//
// The source never gives up: after a list or watch that fails (the API
// server is down, a watch expired with "too old resource version") the
// reflector backs off (0.8 s doubling up to Options.MaxRetryInterval, 2 s,
// each wait stretched by up to 1.5x) and lists again; the pods of the last
// snapshot stand meanwhile. So after an outage the source sees the API
// server again within 3 s of its return, where client-go's default back-off
// (30 s, stretched by up to 2x, and not reset between outages less than 2
// minutes apart) left the kubelet's pod watch blind for up to a minute. The
// first failed request of an outage is logged, as an error, and the first
// list that completes after it, with how long the requests failed; the
// attempts between are logged at V(4). A relist that finds the pods
// unchanged sends nothing new to the merge, which ignores identical
// snapshots anyway.
//
// # Concurrency
//
// Run starts one goroutine (the reflector) besides its own and returns
// after it exited; Run must not be called concurrently with itself. Pods
// may be called from any goroutine at any time; it reports not synced
// before the first list of a Run and after Run returned. The pods sent and
// those Pods returns are the decoded API objects, shared and never modified
// afterwards: treat them as read-only.
package apiserver
