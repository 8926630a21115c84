package backend

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// eventBuffer bounds the events waiting for one subscriber. A subscriber
// that falls this far behind loses its stream (ResourceExhausted) rather
// than make the runtime wait or drop events silently.
const eventBuffer = 4096

// subscriber is one GetContainerEvents call.
type subscriber struct {
	ch   chan *runtimeapi.ContainerEventResponse
	done chan struct{} // closed when the runtime ends the stream
	err  error         // why, set before done is closed
}

// emitLocked sends an event about the container (or sandbox) id of s, with
// the statuses of the sandbox and its containers, as containerd does.
func (r *Runtime) emitLocked(id string, s *sandboxRecord, typ runtimeapi.ContainerEventType) {
	if len(r.subs) == 0 || s == nil {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          time.Now().UnixNano(),
		PodSandboxStatus:   r.sandboxStatusLocked(s),
	}
	for _, c := range s.containers {
		ev.ContainersStatuses = append(ev.ContainersStatuses, c.status())
	}
	for sub := range r.subs {
		select {
		case sub.ch <- ev:
		default:
			r.endStreamLocked(sub, status.Error(codes.ResourceExhausted, "backend: event subscriber too slow"))
		}
	}
}

func (r *Runtime) endStreamLocked(sub *subscriber, err error) {
	if _, ok := r.subs[sub]; !ok {
		return
	}
	delete(r.subs, sub)
	sub.err = err
	close(sub.done)
}

// GetContainerEvents implements runtime.ContainerEventStreamer: a CREATED,
// STARTED, STOPPED or DELETED event for every change of a container or
// sandbox after the call, with the statuses of the sandbox and its
// containers, until ctx ends. It returns a status error, as the CRI client
// does: Canceled or DeadlineExceeded when ctx ends, Unavailable when the
// Runtime is closed, ResourceExhausted when the caller falls more than 4096
// events behind. The callback, if any, is called once the stream is set
// up; its stream argument only supports Context.
func (r *Runtime) GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if err := r.enter(); err != nil {
		return err
	}
	sub := &subscriber{ch: make(chan *runtimeapi.ContainerEventResponse, eventBuffer), done: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return status.Error(codes.Unavailable, "backend: runtime closed")
	}
	r.subs[sub] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.endStreamLocked(sub, nil)
		r.mu.Unlock()
	}()
	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(runtime.ChannelEventStream(ctx))
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-sub.done:
			return sub.err
		case ev := <-sub.ch:
			select {
			case containerEventsCh <- ev:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			case <-sub.done:
				return sub.err
			}
		}
	}
}
