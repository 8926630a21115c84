package runtimehealth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestCheckerPushedHealth: a healthy runtime that pushes its health is
// checked at each change and once a minute, not every period; a change
// is seen at once; while it fails it is polled every period, and once it
// answers again the checks stop. On a goroutine of the Checker's own and
// as a task of a periodic.Driver (Options.Periodic).
func TestCheckerPushedHealth(t *testing.T) {
	for _, driver := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", driver), func(t *testing.T) { testCheckerPushedHealth(t, driver) })
	}
	// Without the capability: no Changes.
	if StatusChanges(nil) != nil {
		t.Error("StatusChanges(nil) is not nil")
	}
}

func testCheckerPushedHealth(t *testing.T, driver bool) {
	synctest.Test(t, func(t *testing.T) {
		var d *periodic.Driver
		if driver {
			d = periodictest.Start(t)
		}
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		scoped := runtime.WithIdentity(rt, "node-a")
		changes := StatusChanges(scoped)
		if changes == nil {
			t.Fatal("no StatusChanges through the scoped runtime")
		}
		c := NewChecker(func(ctx context.Context) error {
			_, err := scoped.Status(ctx, false)
			return err
		}, Options{Period: 5 * time.Second, Changes: changes, Periodic: d})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		calls := func() int { return rt.Calls("Status") }
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := calls(); n != 11 {
			t.Fatalf("%d Status calls over 10 idle minutes, want 11 (the first and one a minute)", n)
		}
		// Down: seen at once, then polled every period.
		rt.SetDown(true)
		synctest.Wait()
		if err := c.Err(); err == nil {
			t.Fatal("a runtime gone down is still healthy")
		}
		n := calls()
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if got := calls() - n; got != 3 {
			t.Fatalf("%d Status calls over 3 periods of an unhealthy runtime, want 3", got)
		}
		// Up again: seen at once, and the polling stops.
		rt.SetDown(false)
		synctest.Wait()
		if err := c.Err(); err != nil {
			t.Fatalf("a runtime back up is unhealthy: %v", err)
		}
		n = calls()
		time.Sleep(50 * time.Second)
		synctest.Wait()
		if got := calls() - n; got != 0 {
			t.Errorf("%d Status calls within a minute of a healthy runtime's last check, want 0", got)
		}
		// An error injected into Status is a change.
		rt.InjectError("Status", errors.New("broken"))
		synctest.Wait()
		if err := c.Err(); err == nil {
			t.Error("an error injected into Status is not seen")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
