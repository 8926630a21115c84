package cri

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetContainerEvents implements runtime.ContainerEventStreamer: it opens
// the runtime's stream of container events (CRI GetContainerEvents) and
// sends each event to containerEventsCh until ctx ends or the stream
// fails. connectionEstablishedCallback, if not nil, is called once the
// stream is open (the connection is up and the request sent), before the
// first event, as in the kubelet's CRI client. gRPC reports a method the
// runtime lacks only on the first receive: a runtime without events
// (containerd 1.6) gets the callback called, then GetContainerEvents
// returns runtime.ErrUnimplemented at once.
//
// It always returns an error: an *Error of code Canceled or
// DeadlineExceeded (errors.Is context.Canceled / context.DeadlineExceeded)
// when ctx ended;
// runtime.ErrUnimplemented when the runtime has no event stream
// (containerd 1.6); runtime.ErrUnavailable when the runtime went away;
// io.EOF (wrapped) when the runtime ended the stream. The stream has no
// per-call timeout. The channel is never closed.
func (c *Client) GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream on every return
	stream, err := c.rc.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return wrap("GetContainerEvents", "", err)
	}
	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(stream)
	}
	if v := c.log.V(4); v.Enabled() {
		v.Info("container event stream established")
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("cri: GetContainerEvents: the runtime closed the stream: %w", err)
		}
		if err != nil {
			return wrap("GetContainerEvents", "", err)
		}
		select {
		case containerEventsCh <- resp:
		case <-ctx.Done():
			return wrap("GetContainerEvents", "", status.FromContextError(ctx.Err()).Err())
		}
	}
}
