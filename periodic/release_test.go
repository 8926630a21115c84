package periodic

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A task whose context ended leaves the Driver at Wait, and without a
// Wait when it comes due: an agent's stopped tasks are not held.
func TestStoppedTasksLeaveTheDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDriver()
		dctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(dctx) }()
		defer func() {
			stop()
			<-done
		}()
		f := func(context.Context) time.Duration { return time.Minute }
		held := func() int {
			d.mu.Lock()
			defer d.mu.Unlock()
			return len(d.tasks)
		}

		ctx, cancel := context.WithCancel(t.Context())
		waited := d.Start(ctx, Idle, f)
		dropped := d.Start(ctx, time.Minute, f)
		synctest.Wait()
		if n := held(); n != 2 {
			t.Fatalf("%d tasks held, want 2", n)
		}
		cancel()
		waited.Wait()
		if n := held(); n != 1 {
			t.Fatalf("%d tasks held after one's Wait, want 1", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := held(); n != 0 {
			t.Fatalf("%d tasks held once the other came due, want none", n)
		}
		dropped.Wait() // returns at once: no call ran
	})
}
