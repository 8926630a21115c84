// Package runtimehealth watches the container runtime's health, as the
// kubelet's updateRuntimeUp: a Checker reads the runtime's CRI Status
// every few seconds (RuntimeReady and NetworkReady), so that the sync
// loop backs off while the runtime is down and the Node reports it; a
// HandlerCache keeps the runtime handlers the Status reads name, for the
// Node's status.runtimeHandlers.
//
// # Usage
//
//	hc := &runtimehealth.HandlerCache{RuntimeService: rs}
//	c := runtimehealth.NewChecker(podRuntime.Status, runtimehealth.Options{})
//	group.Add("runtime status", c)
//	loopConfig.RuntimeHealthy = func(context.Context) error { return c.Err() }
//
// # Runtimes that push their health
//
// A runtime that tells when its Status may change (StatusChanges finds an
// OnStatusChange method on it, as runtimetest.Runtime, the in-memory
// runtime of hollow nodes, has) is not polled while it is healthy: the
// Checker checks it at each change, and once every IdlePeriod (1m) as a
// safety net, rather than every 5 s as the kubelet does for any runtime.
// What it reports is the same, sooner after a change; an idle agent does
// not wake to ask a runtime that would have said so. While a check fails
// the Checker polls every Period again, as the kubelet.
//
// It is internal: nodekit's wiring builds it; a hand-assembled agent gates
// its sync loop with syncloop.Config.RuntimeHealthy, over the pod-level
// runtime manager's Status.
//
// # Concurrency
//
// A Checker and a HandlerCache are safe for concurrent use.
package runtimehealth

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
)

// errNotChecked is a Checker's result before its first check.
var errNotChecked = errors.New("runtimehealth: runtime not checked yet")

// Options configure a Checker.
type Options struct {
	// Period is how often the runtime is checked. Defaults to 5s.
	Period time.Duration
	// OnRecover, when set, is called when the runtime answers again
	// after a failed check (not after the first check).
	OnRecover func()
	// Changes, when set, subscribes f to the changes of the runtime's
	// Status (StatusChanges) until stop is called: while the runtime is
	// healthy it is then checked at each change and every IdlePeriod
	// rather than every Period.
	Changes func(f func()) (stop func())
	// IdlePeriod is how often a healthy runtime with Changes is checked
	// without a change. Defaults to 1m.
	IdlePeriod time.Duration
	// Periodic, when set, runs the checks as a task of the Driver, which
	// the agents of one process can share (hollow nodes do): the Checker
	// then holds no goroutine between them. Defaults to nil: a goroutine
	// of the Checker's own waits between them.
	Periodic *periodic.Driver
	Logger   logr.Logger
}

// Checker checks the runtime's health periodically and holds the last
// result.
type Checker struct {
	status func(context.Context) error
	o      Options
	err    atomic.Pointer[errBox]
}

type errBox struct{ err error }

// NewChecker returns a Checker of status (the pod-level runtime manager's
// Status: nil when the runtime is ready). It does no I/O.
func NewChecker(status func(context.Context) error, o Options) *Checker {
	if o.Period <= 0 {
		o.Period = 5 * time.Second
	}
	if o.IdlePeriod <= 0 {
		o.IdlePeriod = time.Minute
	}
	c := &Checker{status: status, o: o}
	c.err.Store(&errBox{err: errNotChecked})
	return c
}

// Err is the last check's result: nil when the runtime was healthy, an
// error saying so before the first check.
func (c *Checker) Err() error { return c.err.Load().err }

// Run checks the runtime at once, then every Period (with Changes, while
// it is healthy: at each change and every IdlePeriod), until ctx ends.
func (c *Checker) Run(ctx context.Context) error { return run.Until(ctx, c) }

// Start is Run without waiting for ctx to end (run.Starter).
func (c *Checker) Start(ctx context.Context) (wait func(), err error) {
	task := c.o.Periodic.Start(ctx, 0, func(ctx context.Context) time.Duration {
		c.check(ctx)
		if c.o.Changes != nil && c.Err() == nil {
			return c.o.IdlePeriod
		}
		return c.o.Period
	})
	unsubscribe := func() {}
	if c.o.Changes != nil {
		// A change during a check makes the next due right after it.
		unsubscribe = c.o.Changes(func() { task.Reset(0) })
	}
	return func() {
		task.Wait()
		unsubscribe()
	}, nil
}

// StatusChanges returns the OnStatusChange method of rs, or of the
// runtime it scopes (runtime.Scoped), for Options.Changes; nil when
// neither has one.
func StatusChanges(rs runtime.RuntimeService) func(f func()) (stop func()) {
	for rs != nil {
		if n, ok := rs.(interface{ OnStatusChange(func()) func() }); ok {
			return n.OnStatusChange
		}
		s, ok := rs.(runtime.Scoped)
		if !ok {
			return nil
		}
		rs = s.Unwrap()
	}
	return nil
}

func (c *Checker) check(ctx context.Context) {
	err := c.status(ctx)
	if err != nil && ctx.Err() != nil {
		return // stopping: the runtime was not asked
	}
	prev := c.err.Swap(&errBox{err: err})
	switch {
	case err != nil && (prev.err == nil || prev.err.Error() != err.Error()):
		c.o.Logger.Error(err, "Container runtime not healthy")
	case err == nil && prev.err != nil:
		c.o.Logger.Info("Container runtime healthy")
		// The first check ends no outage: the collectors' own periods
		// cover what an earlier run left.
		if prev.err != errNotChecked && c.o.OnRecover != nil {
			c.o.OnRecover()
		}
	}
}
