package nodekit

import (
	"context"
	"errors"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
)

// runtimeHandlerCache is the runtime's CRI service keeping the handlers
// of its last Status response whose RuntimeReady condition is true, as
// the kubelet's updateRuntimeUp keeps them (setRuntimeHandlers) from the
// Status it reads for the runtime's health: the Node's
// status.runtimeHandlers then cost no call of their own.
type runtimeHandlerCache struct {
	runtime.RuntimeService

	mu       sync.Mutex
	handlers []*runtimeapi.RuntimeHandler
	known    bool
}

// cacheRuntimeHandlers wraps rs so that its Status responses feed the
// Node's runtime handlers (nodeRuntimeHandlers).
func (a *Agent) cacheRuntimeHandlers(rs runtime.RuntimeService) runtime.RuntimeService {
	c := a.handlerCache()
	c.RuntimeService = rs
	return c
}

// handlerCache is the agent's runtimeHandlerCache, made on first use:
// New sets up the Node (nodeRuntimeHandlers) before the runtime manager
// (cacheRuntimeHandlers).
func (a *Agent) handlerCache() *runtimeHandlerCache {
	if a.runtimeHandlers == nil {
		a.runtimeHandlers = &runtimeHandlerCache{}
	}
	return a.runtimeHandlers
}

// Status is the runtime's, whose handlers are kept when the runtime is
// ready.
func (c *runtimeHandlerCache) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := c.RuntimeService.Status(ctx, verbose)
	if err != nil || !runtimeReady(resp) {
		return resp, err
	}
	c.mu.Lock()
	c.handlers, c.known = resp.GetRuntimeHandlers(), true
	c.mu.Unlock()
	return resp, err
}

// errNoRuntimeHandlers: no Status of a ready runtime has been read yet.
var errNoRuntimeHandlers = errors.New("nodekit: runtime handlers not known yet: the runtime has not been ready")

// get returns the kept handlers.
func (c *runtimeHandlerCache) get(context.Context) ([]*runtimeapi.RuntimeHandler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return nil, errNoRuntimeHandlers
	}
	return c.handlers, nil
}

func runtimeReady(resp *runtimeapi.StatusResponse) bool {
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			return c.GetStatus()
		}
	}
	return false
}

// nodeRuntimeHandlers sets o.RuntimeHandlers, when unset, to the handlers
// of the last CRI Status response of the ready runtime, read by the
// agent's runtime health check (every RuntimeStatusPeriod): the Node's
// status.runtimeHandlers, as the kubelet reports them. Until the runtime
// has been ready once the Node's stay.
func (a *Agent) nodeRuntimeHandlers(o *node.Options) {
	if o.RuntimeHandlers != nil {
		return
	}
	o.RuntimeHandlers = a.handlerCache().get
}
