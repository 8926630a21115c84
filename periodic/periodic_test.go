package periodic_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/periodic"
)

// calls records when a task was called, relative to start.
type calls struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
}

func (c *calls) f(next time.Duration, took time.Duration) func(context.Context) time.Duration {
	return func(ctx context.Context) time.Duration {
		c.mu.Lock()
		c.at = append(c.at, time.Since(c.start))
		c.mu.Unlock()
		time.Sleep(took)
		return next
	}
}

func (c *calls) get() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.at...)
}

// A task is called after first, then the duration it returned after each
// call returned; its calls stop when its context ends, and wait returns
// once the call in flight returned. With a Driver and without one.
func TestGoCallsOnSchedule(t *testing.T) {
	for _, mode := range []string{"driver", "own"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var d *periodic.Driver
				if mode == "driver" {
					d = periodictest.Start(t)
				}
				c := &calls{start: time.Now()}
				ctx, cancel := context.WithCancel(t.Context())
				wait := d.Go(ctx, time.Second, c.f(10*time.Second, 2*time.Second))
				time.Sleep(25 * time.Second)
				// Called at 1s (returns at 3s), 13s (15s), 25s: in flight.
				synctest.Wait()
				want := []time.Duration{time.Second, 13 * time.Second, 25 * time.Second}
				if got := c.get(); !slices.Equal(got, want) {
					t.Fatalf("calls at %v, want %v", got, want)
				}
				cancel()
				returned := make(chan struct{})
				go func() { wait(); close(returned) }()
				synctest.Wait()
				select {
				case <-returned:
					t.Fatal("wait returned with a call in flight")
				default:
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				select {
				case <-returned:
				default:
					t.Fatal("wait did not return once the call in flight returned")
				}
				time.Sleep(time.Minute)
				if got := c.get(); len(got) != 3 {
					t.Errorf("calls at %v after the stop, want none after 25s", got)
				}
			})
		})
	}
}

// Many tasks on one Driver hold no goroutine between their calls: idle,
// the Driver runs its own goroutine and at most 4 idle workers, not one
// per task; each task keeps its own schedule.
func TestDriverHoldsNoGoroutinePerTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := periodic.NewDriver()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		const n = 100
		var counts [n]atomic.Int32
		var waits []func()
		for i := range n {
			period := time.Duration(1+i%10) * time.Second
			waits = append(waits, d.Go(ctx, 0, func(context.Context) time.Duration {
				counts[i].Add(1)
				return period
			}))
		}
		time.Sleep(30*time.Second + time.Millisecond)
		synctest.Wait()
		if g := driverGoroutines(); g < 1 || g > 5 {
			t.Errorf("%d goroutines of the Driver with %d idle tasks, want 1 to 5 (its Run and at most 4 idle workers)", g, n)
		}
		for i := range n {
			period := 1 + i%10
			if got, want := counts[i].Load(), int32(1+30/period); got != want {
				t.Errorf("task %d (every %ds) called %d times in 30s, want %d", i, period, got, want)
			}
		}
		cancel()
		for _, w := range waits {
			w()
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// A task whose context ended before its first call is never called; a
// second Run fails.
func TestStoppedTaskNotCalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := periodic.NewDriver()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		tctx, tcancel := context.WithCancel(ctx)
		var called atomic.Bool
		wait := d.Go(tctx, time.Second, func(context.Context) time.Duration { called.Store(true); return time.Second })
		tcancel()
		wait()
		time.Sleep(5 * time.Second)
		if called.Load() {
			t.Error("a stopped task was called")
		}
		synctest.Wait()
		if err := d.Run(ctx); err == nil {
			t.Error("a second Run returned nil, want an error")
		}
		cancel()
		<-done
	})
}

// driverGoroutines counts the goroutines running the package's code (a
// frame of a periodic function in their stacks), whatever else the
// process runs.
func driverGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/nodekit/nodekit/periodic.") {
			n++
		}
	}
	return n
}

// Reset moves a task's next call: while it waits, to the Reset's time;
// while a call runs, the call after it is due at the Reset's time, in place
// of the duration the call returns. With a Driver and without one.
func TestTaskReset(t *testing.T) {
	for _, mode := range []string{"driver", "own"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var d *periodic.Driver
				if mode == "driver" {
					d = periodictest.Start(t)
				}
				c := &calls{start: time.Now()}
				ctx, cancel := context.WithCancel(t.Context())
				task := d.Start(ctx, time.Minute, c.f(time.Minute, 2*time.Second))
				time.Sleep(5 * time.Second)
				task.Reset(0) // called at 5s, returns at 7s
				time.Sleep(time.Second)
				task.Reset(10 * time.Second) // during the call: the next at 16s
				time.Sleep(15 * time.Second) // 21s
				task.Reset(4 * time.Second)  // the next at 25s, not at 78s
				time.Sleep(10 * time.Second) // 31s
				synctest.Wait()
				want := []time.Duration{5 * time.Second, 16 * time.Second, 25 * time.Second}
				if got := c.get(); !slices.Equal(got, want) {
					t.Fatalf("calls at %v, want %v", got, want)
				}
				time.Sleep(time.Minute) // 91s: the call returned at 27s said a minute
				synctest.Wait()
				want = append(want, 87*time.Second)
				if got := c.get(); !slices.Equal(got, want) {
					t.Fatalf("calls at %v, want %v", got, want)
				}
				cancel()
				task.Wait()
				task.Reset(0)
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := c.get(); !slices.Equal(got, want) {
					t.Fatalf("calls at %v after the task stopped, want %v", got, want)
				}
			})
		})
	}
}
