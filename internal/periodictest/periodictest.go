// Package periodictest runs a periodic.Driver for a test.
package periodictest

import (
	"context"
	"testing"

	"github.com/nodekit/nodekit/periodic"
)

// Start runs a new Driver until the test ends: its cleanup, which runs
// after the test's deferred calls (those that stop the parts using it),
// stops the Driver and waits for it. In a synctest bubble the cleanup
// runs in the bubble.
func Start(t testing.TB) *periodic.Driver {
	t.Helper()
	d := periodic.NewDriver()
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("periodic.Driver.Run: %v", err)
		}
	})
	return d
}
