// Package mirror keeps a mirror pod in the API server for each static pod
// the agent runs (from a file or a URL), the kubelet's mirror client.
//
// A mirror pod is a copy of the static pod (name, namespace, labels,
// annotations and spec) bound to the node, with the annotation
// kubernetes.io/config.mirror set to the static pod's
// kubernetes.io/config.hash, and owned by the Node object. It makes the
// static pod visible to the cluster; the agent reports the static pod's
// status through it (package status) and never runs it.
//
// Manager.Sync, called by the agent's housekeeping with the static pods it
// runs, lists the pods bound to the node and
//
//   - creates the mirror pod of each static pod that has none, so that a
//     mirror pod deleted by a user comes back;
//   - deletes (grace period 0, UID precondition) and creates again a mirror
//     pod that is being deleted or stale: its hash is not the static pod's
//     (the manifest changed);
//   - deletes the mirror pods whose static pod is gone.
//
// # Usage
//
//	mirrors, err := mirror.New(client, mirror.Options{NodeName: node, Node: nodes.Node, Logger: log})
//	...
//	// every housekeeping:
//	if err := mirrors.Sync(ctx, staticPods); err != nil { log.Error(err, "Syncing mirror pods") }
//
// The API server delivers mirror pods to the agent's API source like any
// pod bound to the node: the agent recognises them with IsMirrorPod and
// maps them to their static pod by full name instead of running them.
//
// # Concurrency
//
// Manager is safe for concurrent use; calls of Sync are serialised.
//
// # Errors
//
// Sync returns the errors of the requests that failed, joined; what failed
// is tried again at the next Sync.
package mirror
