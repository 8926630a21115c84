package nodekit

import "github.com/nodekit/nodekit/runtime"

// scopeRuntime gives the agent its identity on the runtime: its NodeName.
// Every sandbox and container the agent creates carries the label
// runtime.LabelAgent=<NodeName>, and every list of the runtime (the PLEG's
// relist and event stream, housekeeping, orphan removal) sees only the
// objects with that label, so agents of different node names share a
// runtime without touching each other's pods, and a restarted agent of the
// same name adopts its pods. A Runtime already scoped with
// runtime.WithIdentity keeps the identity it was given.
//
// The kubelet has no such label: it owns its runtime, and removes every
// pod it does not know.
func scopeRuntime(o *Options) {
	o.Runtime = runtime.WithIdentity(o.Runtime, o.NodeName)
}
