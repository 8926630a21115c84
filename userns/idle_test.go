package userns

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/periodictest"
)

// TestRunIdleWithoutMappings: while no pod holds a mapping, Run keeps no
// ticker (an idle node's manager wakes for nothing); the first mapping
// starts the periods, which release a removed pod's block within one,
// and they stop again once no mapping is left.
func TestRunIdleWithoutMappings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		m := newManager(t, Options{Runtime: supporting(""), Range: &Range{65536, 65536 * 110}, Clock: clk})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if clk.HasWaiters() {
			t.Fatal("Run keeps a ticker with no mapping to watch")
		}
		if _, err := m.PodUserNamespace(ctx, userPod("a", ptr(false)), ""); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !clk.HasWaiters() {
			t.Fatal("Run keeps no ticker with a mapping to watch")
		}
		if err := os.RemoveAll(filepath.Join(m.opts.RootDir, "pods", "a")); err != nil {
			t.Fatal(err)
		}
		clk.Step(2 * time.Second)
		synctest.Wait()
		if _, ok := m.Allocated("a"); ok {
			t.Error("pod a still holds its range a period after its directory was removed")
		}
		if clk.HasWaiters() {
			t.Error("Run keeps a ticker once no mapping is left")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestRunWithDriver: with Options.Periodic, the first mapping makes the
// Driver's task due within a period, which releases a removed pod's block;
// the Manager holds no goroutine of its own.
func TestRunWithDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newManager(t, Options{Runtime: supporting(""), Range: &Range{65536, 65536 * 110}, Periodic: periodictest.Start(t)})
		ctx, cancel := context.WithCancel(t.Context())
		wait, err := m.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // idle: no mapping to watch
		synctest.Wait()
		if n := leakcheck.Goroutines("userns.(*Manager)"); n > 0 {
			t.Errorf("%d goroutines in the Manager's code while idle, want none", n)
		}
		if _, err := m.PodUserNamespace(ctx, userPod("a", ptr(false)), ""); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(m.opts.RootDir, "pods", "a")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, ok := m.Allocated("a"); ok {
			t.Error("pod a still holds its range a period after its directory was removed")
		}
		cancel()
		wait()
	})
}
