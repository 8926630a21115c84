package nodekit

import "github.com/nodekit/nodekit/runtime"

// wirePullSecrets gives the runtime manager the agent's Secrets getter
// (Options.Objects, or the API server's through the objects cache) for
// the pods' imagePullSecrets, unless Options.RuntimeManager has its own.
func (a *Agent) wirePullSecrets(o *runtime.ManagerOptions) {
	if o.Secrets == nil && a.spec.objects != nil {
		o.Secrets = a.spec.objects
	}
}
