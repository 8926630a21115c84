package cri

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.WireLister = (*Client)(nil)

// ListPodSandboxWire implements runtime.WireLister: the same call as
// ListPodSandbox (same request, same content type, same timeout and
// errors), with the answer kept in its protobuf encoding.
func (c *Client) ListPodSandboxWire(ctx context.Context, filter *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp := wireResponse{buf: buf}
	err := c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName,
		&runtimeapi.ListPodSandboxRequest{Filter: filter}, &resp, wireCallOption)
	if err != nil {
		return nil, wrap("ListPodSandbox", "", err)
	}
	return resp.buf, nil
}

// ListContainersWire implements runtime.WireLister: the same call as
// ListContainers, with the answer kept in its protobuf encoding.
func (c *Client) ListContainersWire(ctx context.Context, filter *runtimeapi.ContainerFilter, buf []byte) ([]byte, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp := wireResponse{buf: buf}
	err := c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListContainers_FullMethodName,
		&runtimeapi.ListContainersRequest{Filter: filter}, &resp, wireCallOption)
	if err != nil {
		return nil, wrap("ListContainers", "", err)
	}
	return resp.buf, nil
}

// wireResponse receives a response message as its bytes.
type wireResponse struct{ buf []byte }

// wireCallOption makes a call decode its response into a wireResponse.
var wireCallOption = grpc.ForceCodecV2(wireCodec{proto: encoding.GetCodecV2(proto.Name)})

// wireCodec encodes requests as gRPC's proto codec does and copies the
// response's bytes into a wireResponse, once, without decoding them. Its
// empty Name leaves the call's content type the generated client's
// ("application/grpc"), so the runtime sees the same request.
type wireCodec struct{ proto encoding.CodecV2 }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*wireResponse)
	if !ok {
		return fmt.Errorf("cri: wire codec cannot decode into %T", v)
	}
	b := slices.Grow(r.buf[:0], data.Len())
	for _, d := range data {
		b = append(b, d.ReadOnlyData()...)
	}
	r.buf = b
	return nil
}

func (wireCodec) Name() string { return "" }
