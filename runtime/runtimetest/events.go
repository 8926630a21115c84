package runtimetest

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// eventQueueLimit is how many events may wait for one subscriber before
// the calls that make events wait for it, as containerd's: its CRI event
// queue holds 100 events for each subscriber and blocks the call that
// sends one more (StartContainer, ...) until the subscriber takes one; a
// slow subscriber slows the runtime down rather than lose its stream or
// its events.
const eventQueueLimit = 100

// subscriber is one GetContainerEvents call.
type subscriber struct {
	mu     sync.Mutex
	queue  []*runtimeapi.ContainerEventResponse
	notify chan struct{} // capacity 1: "the queue is not empty"
	room   chan struct{} // closed when the queue is taken; nil until a call waits
	done   chan struct{} // closed when the runtime ends the stream
	err    error         // why, set before done is closed
}

// emitLocked sends an event about the container (or sandbox) id of sandbox
// s to every subscriber, with the sandbox's status and the statuses of its
// containers, as containerd does.
func (r *Runtime) emitLocked(id string, s *sandbox, typ runtimeapi.ContainerEventType) {
	if len(r.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          now(),
		PodSandboxStatus:   s.status,
	}
	if len(s.containers) > 0 {
		ev.ContainersStatuses = make([]*runtimeapi.ContainerStatus, len(s.containers))
		for i, c := range s.containers {
			ev.ContainersStatuses[i] = c.status
		}
	}
	for sub := range r.subs {
		sub.mu.Lock()
		sub.queue = append(sub.queue, ev)
		sub.mu.Unlock()
		select {
		case sub.notify <- struct{}{}:
		default:
		}
	}
}

// waitEvents makes a call that sent events wait, after it released the
// runtime's lock, while a subscriber has eventQueueLimit events or more
// waiting: until the subscriber takes them, its stream ends, or ctx ends.
func (r *Runtime) waitEvents(ctx context.Context) {
	for {
		var full *subscriber
		var room chan struct{}
		r.mu.RLock()
		for sub := range r.subs {
			sub.mu.Lock()
			if len(sub.queue) >= eventQueueLimit {
				if sub.room == nil {
					sub.room = make(chan struct{})
				}
				full, room = sub, sub.room
			}
			sub.mu.Unlock()
			if full != nil {
				break
			}
		}
		r.mu.RUnlock()
		if full == nil {
			return
		}
		select {
		case <-room:
		case <-full.done:
		case <-ctx.Done():
			return
		}
	}
}

func (r *Runtime) endStreamLocked(sub *subscriber, err error) {
	if _, ok := r.subs[sub]; !ok {
		return
	}
	delete(r.subs, sub)
	r.subsChangedLocked()
	sub.err = err
	close(sub.done)
}

func (r *Runtime) subsChangedLocked() {
	if r.subsChanged != nil {
		close(r.subsChanged)
		r.subsChanged = nil
	}
}

// WaitSubscribers waits until at least n GetContainerEvents calls are
// subscribed, so that every event from then on reaches them, or until ctx
// ends. The callback of GetContainerEvents tells less through a CRI
// client: there it runs once the request is sent, before the runtime
// behind the server has subscribed.
func (r *Runtime) WaitSubscribers(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		if len(r.subs) >= n {
			r.mu.Unlock()
			return nil
		}
		if r.subsChanged == nil {
			r.subsChanged = make(chan struct{})
		}
		changed := r.subsChanged
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

func (r *Runtime) endStreamsLocked(err error) {
	for sub := range r.subs {
		r.endStreamLocked(sub, err)
	}
}

// GetContainerEvents implements runtime.ContainerEventStreamer: it sends
// a CREATED, STARTED, STOPPED or DELETED event for every change of a
// container or sandbox that happens after the call, with the statuses of
// the sandbox and its containers, until ctx ends. Like the CRI client, it
// returns a status error: Canceled or DeadlineExceeded when ctx ends,
// Unavailable when the runtime is closed or set down. A caller more than
// 100 events behind makes the calls that send events (RunPodSandbox,
// CreateContainer, StartContainer, the stops and removals) wait until it
// catches up, as containerd's do. Inject an Unimplemented
// status to play a runtime without events. The callback, if any, is called
// once the stream is set up; its stream argument only supports Context.
func (r *Runtime) GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return r.GetContainerEventsFiltered(ctx, containerEventsCh, connectionEstablishedCallback, nil)
}

// GetContainerEventsFiltered implements runtime.FilteredEventStreamer:
// GetContainerEvents without the events keep returns false for (all of
// them pass with a nil keep), left out on the stream's own goroutine.
func (r *Runtime) GetContainerEventsFiltered(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient), keep func(*runtimeapi.ContainerEventResponse) bool) error {
	if err := r.enter(ctx, "GetContainerEvents"); err != nil {
		return err
	}
	sub := &subscriber{notify: make(chan struct{}, 1), done: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return status.Error(codes.Unavailable, "runtimetest: runtime closed")
	}
	r.subs[sub] = struct{}{}
	r.subsChangedLocked()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.endStreamLocked(sub, nil)
		r.mu.Unlock()
	}()

	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(runtime.ChannelEventStream(ctx))
	}
	var batch []*runtimeapi.ContainerEventResponse
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-sub.done:
			return sub.err
		case <-sub.notify:
		}
		sub.mu.Lock()
		batch, sub.queue = sub.queue, batch[:0]
		if sub.room != nil {
			close(sub.room)
			sub.room = nil
		}
		sub.mu.Unlock()
		for i, ev := range batch {
			if keep != nil && !keep(ev) {
				batch[i] = nil
				continue
			}
			select {
			case containerEventsCh <- ev:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			case <-sub.done:
				return sub.err
			}
			batch[i] = nil
		}
	}
}
