package runtimetest

import (
	"context"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Wire is a Runtime that also answers its lists in wire form, marshaled
// as a CRI runtime sends them: a runtime.WireLister, for the tests of the
// parts that read the lists that way.
type Wire struct{ *Runtime }

// ListPodSandboxWire appends the marshaled ListPodSandboxResponse to buf[:0].
func (r Wire) ListPodSandboxWire(ctx context.Context, filter *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error) {
	items, err := r.ListPodSandbox(ctx, filter)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(buf[:0], &runtimeapi.ListPodSandboxResponse{Items: items})
}

// ListContainersWire appends the marshaled ListContainersResponse to buf[:0].
func (r Wire) ListContainersWire(ctx context.Context, filter *runtimeapi.ContainerFilter, buf []byte) ([]byte, error) {
	items, err := r.ListContainers(ctx, filter)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(buf[:0], &runtimeapi.ListContainersResponse{Containers: items})
}
