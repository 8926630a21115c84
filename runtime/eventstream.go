package runtime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ChannelEventStream returns the stream an in-process ContainerEventStreamer
// hands to GetContainerEvents' connection-established callback, where a CRI
// client hands its gRPC stream. Events arrive on the channel given to
// GetContainerEvents, never through the stream: its receive methods answer
// Unimplemented.
func ChannelEventStream(ctx context.Context) runtimeapi.RuntimeService_GetContainerEventsClient {
	return channelEventStream{ctx: ctx}
}

type channelEventStream struct {
	ctx context.Context
}

func (s channelEventStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	return nil, status.Error(codes.Unimplemented, "runtime: events are delivered on the channel")
}
func (s channelEventStream) Header() (metadata.MD, error) { return nil, nil }
func (s channelEventStream) Trailer() metadata.MD         { return nil }
func (s channelEventStream) CloseSend() error             { return nil }
func (s channelEventStream) Context() context.Context     { return s.ctx }
func (s channelEventStream) SendMsg(any) error {
	return status.Error(codes.Unimplemented, "runtime: not a client-streaming call")
}
func (s channelEventStream) RecvMsg(any) error {
	return status.Error(codes.Unimplemented, "runtime: events are delivered on the channel")
}
