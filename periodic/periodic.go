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
	work   chan *Task
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
	return &Driver{wake: make(chan struct{}, 1), work: make(chan *Task)}
}

// Idle is what a task's call returns when it has nothing to do until a
// Reset: its next call is then a day later, unless a Reset comes first.
const Idle = 24 * time.Hour

// Task is a task given to Start: Reset moves its next call, Wait waits
// for it to stop.
type Task struct {
	d     *Driver
	ctx   context.Context
	f     func(context.Context) time.Duration
	due   time.Time
	index int // in d's heap; -1 when not in it

	// mu guards the fields below (with d.mu held too, when d is set and
	// the task is in its heap).
	mu    sync.Mutex
	ended bool      // ctx ended
	busy  bool      // a call runs
	reset time.Time // a Reset's due time, for the call after the one running
	kick  chan struct{}
	// stopped is closed once the task stopped: by its own goroutine
	// without a Driver; with one, made by a Wait that finds a call
	// running, and closed as the call returns.
	stopped chan struct{}
	closed  bool // stopped is closed
}

// Go calls f after first, then, each time f returns, again after the
// duration it returned, until ctx ends; each call gets ctx. It returns at
// once, with wait: wait blocks until ctx ended and the call in flight (if
// any) returned. With a nil Driver the calls run on a goroutine of Go's
// own, which wait waits for.
func (d *Driver) Go(ctx context.Context, first time.Duration, f func(ctx context.Context) time.Duration) (wait func()) {
	return d.Start(ctx, first, f).Wait
}

// Start is Go, returning the Task, whose Reset moves its next call: for
// a part whose periodic work also runs when something happens (a pod
// added, a retry due sooner).
//
// With a Driver, a task whose ctx ended leaves it at Wait (or, if Wait is
// never called, when its next call comes due): the task registers
// nothing on ctx, so that a thousand agents' idle tasks hold only
// themselves.
func (d *Driver) Start(ctx context.Context, first time.Duration, f func(ctx context.Context) time.Duration) *Task {
	t := &Task{d: d, ctx: ctx, f: f, index: -1}
	if d == nil {
		t.stopped = make(chan struct{})
		t.kick = make(chan struct{}, 1)
		go t.own(first)
		return t
	}
	d.mu.Lock()
	d.push(t, time.Now().Add(first))
	d.mu.Unlock()
	return t
}

// Wait blocks until the task's context ended and the call in flight (if
// any) returned; no call starts after it.
func (t *Task) Wait() {
	d := t.d
	if d == nil {
		<-t.stopped
		return
	}
	<-t.ctx.Done()
	d.mu.Lock()
	t.mu.Lock()
	t.ended = true
	if t.index >= 0 {
		heap.Remove(&d.tasks, t.index)
	}
	var done chan struct{}
	if t.busy {
		if t.stopped == nil {
			t.stopped = make(chan struct{})
		}
		done = t.stopped
	}
	t.mu.Unlock()
	d.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Reset makes the task's next call due after d from now, in place of the
// time it was due. While a call runs, the call after it is due then, in
// place of the duration the running call returns; of several Resets the
// last wins. It never blocks, and does nothing once the task's context
// ended.
func (t *Task) Reset(d time.Duration) {
	due := time.Now().Add(d)
	if t.d == nil {
		t.mu.Lock()
		if !t.ended {
			t.reset = due
		}
		t.mu.Unlock()
		select {
		case t.kick <- struct{}{}:
		default:
		}
		return
	}
	t.d.mu.Lock()
	t.mu.Lock()
	switch {
	case t.ended:
	case t.busy:
		t.reset = due
	case t.index >= 0:
		t.due = due
		heap.Fix(&t.d.tasks, t.index)
		if t.index == 0 {
			t.d.poke()
		}
	}
	t.mu.Unlock()
	t.d.mu.Unlock()
}

// closeLocked closes stopped once. Called with t.mu held.
func (t *Task) closeLocked() {
	if !t.closed {
		t.closed = true
		close(t.stopped)
	}
}

// takeResetLocked returns the due time of a Reset not yet applied, and forgets
// it. Called with t.mu held.
func (t *Task) takeResetLocked() (time.Time, bool) {
	due := t.reset
	t.reset = time.Time{}
	return due, !due.IsZero()
}

// own runs a task's loop on a goroutine of its own, for a nil Driver.
func (t *Task) own(first time.Duration) {
	defer func() {
		t.mu.Lock()
		t.ended = true
		t.closeLocked()
		t.mu.Unlock()
	}()
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-timer.C:
		case <-t.kick:
			t.mu.Lock()
			due, ok := t.takeResetLocked()
			t.mu.Unlock()
			if !ok {
				continue
			}
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				continue
			}
			timer.Stop()
		}
		next := t.f(t.ctx)
		if t.ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		if due, ok := t.takeResetLocked(); ok {
			next = time.Until(due)
		}
		t.mu.Unlock()
		timer.Reset(next)
	}
}

// poke tells Run (without blocking) that the earliest due time may have
// moved.
func (d *Driver) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// push puts t in the heap, due at due, unless its context ended. Called
// with d.mu held.
func (d *Driver) push(t *Task, due time.Time) {
	t.mu.Lock()
	ended := t.ended
	t.mu.Unlock()
	if ended {
		return
	}
	t.due = due
	heap.Push(&d.tasks, t)
	if t.index == 0 {
		d.poke()
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
			d.start(heap.Pop(&d.tasks).(*Task))
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
func (d *Driver) start(t *Task) {
	t.mu.Lock()
	if t.ended || t.ctx.Err() != nil {
		t.ended = true
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
func (d *Driver) worker(t *Task) {
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
func (d *Driver) call(t *Task) {
	next := t.f(t.ctx)
	due := time.Now().Add(next)
	d.mu.Lock()
	defer d.mu.Unlock()
	t.mu.Lock()
	t.busy = false
	if t.ended || t.ctx.Err() != nil {
		t.ended = true
		if t.stopped != nil {
			t.closeLocked()
		}
		t.mu.Unlock()
		return
	}
	if reset, ok := t.takeResetLocked(); ok {
		due = reset
	}
	t.mu.Unlock()
	d.push(t, due)
}

// taskHeap orders tasks by due time (container/heap).
type taskHeap []*Task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *taskHeap) Push(x any) {
	t := x.(*Task)
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
