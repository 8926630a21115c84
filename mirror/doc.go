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
// runs, reads the pods bound to the node (see Reading the node's pods) and
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
//	src, err := apiserver.New(client, node, apiserver.Options{Logger: log})
//	...
//	mirrors, err := mirror.New(client, mirror.Options{NodeName: node, Node: nodes.Node, Pods: src.Pods, Logger: log})
//	...
//	// every housekeeping:
//	if err := mirrors.Sync(ctx, staticPods); err != nil { log.Error(err, "Syncing mirror pods") }
//
// The API server delivers mirror pods to the agent's API source like any
// pod bound to the node: the agent recognises them with podmodel.IsMirror and
// maps them to their static pod by full name instead of running them.
//
// # Reading the node's pods
//
// With Options.Pods set to the Pods method of the agent's API source
// (apiserver.Source.Pods), whose watch holds every pod bound to the node,
// Sync reads the node's pods from that cache and sends no request unless a
// mirror pod is to be created or deleted (and then the requests that do
// it, and a GET of the Node without Options.Node). Without Options.Pods,
// or while it reports its first list not completed, Sync lists the node's
// pods (field selector spec.nodeName) instead. Either way, while there
// are no static pods and the last read found no mirror pods, Sync reads
// nothing.
//
// The watch lags behind the API server, and behind the manager's own
// writes. A change the watch has not delivered yet is acted on at a later
// Sync. A mirror pod the manager created or deleted is another matter:
// the manager remembers, by full name, the UID of the mirror pod it knows
// to be there (or none), and uses the cache only when the cache agrees
// with all of it; else it lists, once per Sync while the cache lags, and
// remembers what the list shows. So it never creates or deletes a mirror
// pod twice because the watch has not delivered its own write, and a
// mirror pod deleted before the watch showed it (the cache never shows
// it) is found gone by the list and created again. A create that meets
// AlreadyExists takes the pod if it is the mirror pod wanted, and a delete
// that meets NotFound or a changed UID counts as done, with or without a
// cache.
//
// # Concurrency
//
// Manager is safe for concurrent use; calls of Sync are serialised.
//
// # Errors
//
// Sync returns the errors of the requests that failed, joined; what failed
// is tried again at the next Sync. A request that finds the API server
// unreachable (no reply, a timeout, 429, 500 or 503) is the exception: it
// is not returned, the manager logs one error when the API server goes
// away and one line when it is back, and Syncs meanwhile send nothing
// until the back-off (2s doubling to 8s) ends, so that housekeeping
// neither logs an error nor sends a request at every pass while the API
// server is down. Manager.Waiting reports that work was put off; the
// agent's housekeeping then calls Sync at every pass even when nothing
// changed.
package mirror
