package nodekit

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/node"
)

// nodeRuntimeHandlers sets o.RuntimeHandlers, when unset, to the handlers
// of the runtime's CRI Status response: the Node's
// status.runtimeHandlers, as the kubelet reports them from the Status it
// reads for its runtime health.
func (a *Agent) nodeRuntimeHandlers(o *node.Options) {
	if o.RuntimeHandlers != nil {
		return
	}
	rt := a.opts.Runtime
	o.RuntimeHandlers = func(ctx context.Context) ([]*runtimeapi.RuntimeHandler, error) {
		resp, err := rt.Status(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("nodekit: runtime status: %w", err)
		}
		return resp.GetRuntimeHandlers(), nil
	}
}
