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

// RuntimeFeatures converts the features of a CRI Status response
// (StatusResponse.Features) to the Node's status.features, as the
// kubelet's NodeFeatures status setter does (SupplementalGroupsPolicy is
// GA in v1.37): supplementalGroupsPolicy always set, false when the
// runtime does not support it. A runtime that reports no features
// (containerd 1.6, whose CRI predates them) gives nil: the Node's
// status.features is left alone, as the kubelet leaves it.
func RuntimeFeatures(f *runtimeapi.RuntimeFeatures) *v1.NodeFeatures {
	if f == nil {
		return nil
	}
	sgp := f.GetSupplementalGroupsPolicy()
	return &v1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
}

// readRuntimeFeatures asks Options.RuntimeFeatures; nil (the Node's stay)
// when it is unset, fails or reports none.
func (s *statusLoop) readRuntimeFeatures(ctx context.Context) *v1.NodeFeatures {
	if s.c.opts.RuntimeFeatures == nil {
		return nil
	}
	f, err := s.c.opts.RuntimeFeatures(ctx)
	if err != nil {
		s.c.log.V(4).Info("reading the runtime features failed", "err", err)
		return nil
	}
	return RuntimeFeatures(f)
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
