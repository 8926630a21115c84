package runtimehealth

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestChecker: the result follows the runtime's Status at each period,
// and OnRecover is called when the runtime answers after an outage, not
// after the first check.
func TestChecker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := errors.New("runtime down")
		var fail atomic.Bool
		var recovered atomic.Int32
		c := NewChecker(func(context.Context) error {
			if fail.Load() {
				return down
			}
			return nil
		}, Options{Period: time.Second, OnRecover: func() { recovered.Add(1) }})
		if err := c.Err(); !errors.Is(err, errNotChecked) {
			t.Fatalf("Err before Run = %v, want errNotChecked", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		if err := c.Err(); err != nil || recovered.Load() != 0 {
			t.Fatalf("after the first check: Err %v, recovered %d; want nil, 0", err, recovered.Load())
		}
		fail.Store(true)
		time.Sleep(time.Second)
		synctest.Wait()
		if err := c.Err(); !errors.Is(err, down) {
			t.Fatalf("Err = %v, want %v", err, down)
		}
		fail.Store(false)
		time.Sleep(time.Second)
		synctest.Wait()
		if err := c.Err(); err != nil || recovered.Load() != 1 {
			t.Fatalf("after recovery: Err %v, recovered %d; want nil, 1", err, recovered.Load())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
