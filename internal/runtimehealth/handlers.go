package runtimehealth

import (
	"context"
	"errors"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// HandlerCache is the runtime's CRI service keeping the handlers of its
// last Status response whose RuntimeReady condition is true, as the
// kubelet's updateRuntimeUp keeps them (setRuntimeHandlers) from the
// Status it reads for the runtime's health: the Node's
// status.runtimeHandlers (node.Options.RuntimeHandlers: Handlers) then
// cost no call of their own. It keeps the runtime's features too
// (SupplementalGroupsPolicy). Set its RuntimeService before its first
// Status; it is safe for concurrent use.
type HandlerCache struct {
	runtime.RuntimeService

	mu       sync.Mutex
	handlers []*runtimeapi.RuntimeHandler
	features *runtimeapi.RuntimeFeatures
	known    bool
}

// Status is the runtime's, whose handlers are kept when the runtime is
// ready.
func (c *HandlerCache) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := c.RuntimeService.Status(ctx, verbose)
	if err != nil || !runtimeReady(resp) {
		return resp, err
	}
	c.mu.Lock()
	c.handlers, c.features, c.known = resp.GetRuntimeHandlers(), resp.GetFeatures(), true
	c.mu.Unlock()
	return resp, err
}

// errNoRuntimeHandlers: no Status of a ready runtime has been read yet.
var errNoRuntimeHandlers = errors.New("runtimehealth: runtime handlers and features not known yet: the runtime has not been ready")

// Handlers returns the handlers kept, or an error until a ready
// runtime's Status was read.
func (c *HandlerCache) Handlers(context.Context) ([]*runtimeapi.RuntimeHandler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return nil, errNoRuntimeHandlers
	}
	return c.handlers, nil
}

// Features returns the features of the last ready Status (nil when the
// runtime reports none, as containerd 1.6), or an error until a ready
// runtime's Status was read: the Node's status.features
// (node.Options.RuntimeFeatures), as the kubelet's runtimeState keeps
// them.
func (c *HandlerCache) Features(context.Context) (*runtimeapi.RuntimeFeatures, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return nil, errNoRuntimeHandlers
	}
	return c.features, nil
}

// SupplementalGroupsPolicy reports whether the runtime, as its last
// ready Status said, supports the Strict supplemental groups policy: the
// Node's status.features.supplementalGroupsPolicy, as the kubelet sets it
// from the runtime's features. False until a ready Status was read.
func (c *HandlerCache) SupplementalGroupsPolicy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.features.GetSupplementalGroupsPolicy()
}

func runtimeReady(resp *runtimeapi.StatusResponse) bool {
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			return c.GetStatus()
		}
	}
	return false
}

// Names returns the names of the handlers kept, nil until a ready
// runtime's Status was read or when it listed none (containerd 1.6 lists
// none).
func (c *HandlerCache) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known || len(c.handlers) == 0 {
		return nil
	}
	names := make([]string, len(c.handlers))
	for i, h := range c.handlers {
		names[i] = h.GetName()
	}
	return names
}
