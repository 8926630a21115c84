package userns

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
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
