package periodic

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Driver runs the calls of the tasks given to Go when they are due. The
// zero value is not usable; use NewDriver.
type Driver struct {
	mu      sync.Mutex
	tasks   taskHeap
	running bool
	// wake signals Run (without blocking) that the earliest due time may
	// have moved.
	wake chan struct{}
	// calls counts the workers, which Run waits for.
	calls sync.WaitGroup
	// work hands a call to an idle worker (unbuffered: a send succeeds
	// only when one waits); idle counts the workers waiting, at most
	// maxIdle. runCtx is Run's context, which ends the workers.
	work   chan *task
	idle   atomic.Int32
	runCtx context.Context
}

// maxIdle bounds the workers that wait for calls between them. A call
// runs on a worker that ran calls before, whose stack has grown to what
// a call needs (an API request's), rather than on a new goroutine whose
// stack grows again at every call: a thousand hollow nodes' Lease
// renewals spent a tenth of their CPU growing stacks. Beyond maxIdle, a
// worker with nothing to do exits.
const maxIdle = 4

// NewDriver returns a Driver; it runs nothing until Run.
func NewDriver() *Driver {
	return &Driver{wake: make(chan struct{}, 1), work: make(chan *task)}
}

// task is one function given to Go.
type task struct {
	ctx   context.Context
	f     func(context.Context) time.Duration
	due   time.Time
	index int // in the heap; -1 when not in it

	// mu guards stopped, busy and idle.
	mu      sync.Mutex
	stopped bool // ctx ended
	busy    bool // a call runs
	idle    chan struct{}
}

// Go calls f after first, then, each time f returns, again after the
// duration it returned, until ctx ends; each call gets ctx. It returns at
// once, with wait: wait blocks until ctx ended and the call in flight (if
// any) returned. With a nil Driver the calls run on a goroutine of Go's
// own, which wait waits for.
func (d *Driver) Go(ctx context.Context, first time.Duration, f func(ctx context.Context) time.Duration) (wait func()) {
	if d == nil {
		return own(ctx, first, f)
	}
	t := &task{ctx: ctx, f: f, index: -1, idle: make(chan struct{})}
	d.schedule(t, time.Now().Add(first))
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.stopped = true
		if !t.busy {
			close(t.idle)
		}
		t.mu.Unlock()
		// Once stopped, schedule no longer pushes t.
		d.mu.Lock()
		if t.index >= 0 {
			heap.Remove(&d.tasks, t.index)
		}
		d.mu.Unlock()
	})
	return func() { <-t.idle }
}

// own runs a task's loop on a goroutine of its own.
func own(ctx context.Context, first time.Duration, f func(ctx context.Context) time.Duration) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			next := f(ctx)
			if ctx.Err() != nil {
				return
			}
			t.Reset(next)
		}
	}()
	return func() { <-done }
}

// schedule puts t in the heap, due at due, unless it stopped.
func (d *Driver) schedule(t *task, due time.Time) {
	d.mu.Lock()
	t.mu.Lock()
	stopped := t.stopped
	t.mu.Unlock()
	if stopped {
		d.mu.Unlock()
		return
	}
	t.due = due
	heap.Push(&d.tasks, t)
	first := t.index == 0
	d.mu.Unlock()
	if first {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// Run starts the calls that are due until ctx ends, then waits for the
// calls in flight to return. It returns nil when ctx ended.
func (d *Driver) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("periodic: Run is already running")
	}
	d.running = true
	d.runCtx = ctx
	d.mu.Unlock()
	defer d.calls.Wait()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		d.mu.Lock()
		for len(d.tasks) > 0 && !d.tasks[0].due.After(now) {
			d.start(heap.Pop(&d.tasks).(*task))
		}
		next := time.Hour
		if len(d.tasks) > 0 {
			next = d.tasks[0].due.Sub(now)
		}
		d.mu.Unlock()
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-d.wake:
		}
	}
}

// start runs one call of t, then schedules its next. Called with d.mu
// held.
func (d *Driver) start(t *task) {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.busy = true
	t.mu.Unlock()
	select {
	case d.work <- t: // an idle worker runs it
	default:
		d.calls.Go(func() { d.worker(t) })
	}
}

// worker runs t's call, then the calls start hands it, until it has
// nothing to do and maxIdle others wait, or Run's context ended.
func (d *Driver) worker(t *task) {
	for {
		d.call(t)
		if d.idle.Add(1) > maxIdle {
			d.idle.Add(-1)
			return
		}
		select {
		case t = <-d.work:
			d.idle.Add(-1)
		case <-d.runCtx.Done():
			d.idle.Add(-1)
			return
		}
	}
}

// call runs one call of t, then schedules its next.
func (d *Driver) call(t *task) {
	next := t.f(t.ctx)
	t.mu.Lock()
	t.busy = false
	if t.stopped {
		close(t.idle)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	d.schedule(t, time.Now().Add(next))
}

// taskHeap orders tasks by due time (container/heap).
type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
