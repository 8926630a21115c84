package node

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeHandlers converts the runtime handlers of a CRI Status response
// (StatusResponse.RuntimeHandlers) to the Node's status.runtimeHandlers,
// as the kubelet's RuntimeHandlers status setter does: each handler in the
// runtime's order, its name (empty for the default handler) and both
// features always set, false when the runtime reports no features. The
// result is never nil: a runtime that reports no handler gives an empty
// list, as the kubelet's.
func RuntimeHandlers(hs []*runtimeapi.RuntimeHandler) []v1.NodeRuntimeHandler {
	out := make([]v1.NodeRuntimeHandler, len(hs))
	for i, h := range hs {
		rro := h.GetFeatures().GetRecursiveReadOnlyMounts()
		userns := h.GetFeatures().GetUserNamespaces()
		out[i] = v1.NodeRuntimeHandler{
			Name:     h.GetName(),
			Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns},
		}
	}
	return out
}

// readRuntimeHandlers asks Options.RuntimeHandlers; nil (the Node's stay)
// when it is unset or fails.
func (s *statusLoop) readRuntimeHandlers(ctx context.Context) []v1.NodeRuntimeHandler {
	if s.c.opts.RuntimeHandlers == nil {
		return nil
	}
	hs, err := s.c.opts.RuntimeHandlers(ctx)
	if err != nil {
		s.c.log.V(4).Info("reading the runtime handlers failed", "err", err)
		return nil
	}
	return RuntimeHandlers(hs)
}
