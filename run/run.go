// Package run runs the long-running parts of an agent as one list: each
// part has Run(ctx) error, the parts start in the order they were added
// and stop in reverse, each once the parts added after it have returned.
// controller-runtime's manager and its Runnable are the model.
//
// # Usage
//
//	var g run.Group
//	g.Add("pleg", events)        // each a run.Runnable
//	g.Add("pod workers", workers)
//	g.Add("sync loop", loop)
//	err := g.Run(ctx) // until ctx ends or a part fails
//
// A part's producers come before it and its consumers after it, so that
// at a stop every consumer has returned before what it reads from stops:
// the sync loop, added last, stops first.
//
// Each part runs on a goroutine of its own, but for the last, which runs
// on Run's, and the Starters: parts that need no goroutine while they
// wait (their work runs on goroutines they start when there is some, or
// on a shared periodic.Driver), whose Start the group calls instead.
//
// # Concurrency
//
// Add may be called from any goroutine until Run starts; Run is called
// once.
//
// # Errors
//
// A part that returns an error stops the group: Run stops every part and
// returns the first error, prefixed with the part's name. A part that
// returns nil before the group stops has simply finished.
package run

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Runnable is a long-running part: Run blocks until ctx ends or the part
// fails, and returns after every goroutine it started has exited; nil on
// a clean stop.
type Runnable interface {
	Run(ctx context.Context) error
}

// Func is a Runnable made of a function.
type Func func(ctx context.Context) error

// Run calls f.
func (f Func) Run(ctx context.Context) error { return f(ctx) }

var _ Runnable = Func(nil)

// Group is a list of named parts run together. The zero value is an empty
// group ready to use.
type Group struct {
	mu      sync.Mutex
	parts   []part
	started bool
}

type part struct {
	name string
	r    Runnable
}

// ErrStarted is returned by Add and Run once Run has started.
var ErrStarted = errors.New("run: the group has started")

// Add appends a part, which starts after those added before it and stops
// before them. A nil r is ignored, so that optional parts can be added
// unconditionally.
func (g *Group) Add(name string, r Runnable) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return fmt.Errorf("adding %q: %w", name, ErrStarted)
	}
	if r != nil {
		g.parts = append(g.parts, part{name: name, r: r})
	}
	return nil
}

// Run starts every part, in order, and waits until ctx ends or a part
// fails. It then stops the parts in reverse order, each after the parts
// that follow it have returned, and returns when all have: nil when ctx
// ended, else the first error. The parts' contexts carry ctx's values but
// end only at their stop.
//
// Each part runs in a goroutine of its own, but for the last, which runs
// on Run's, and the Starters, which need none: Run calls their Start, in
// the order of the parts, and their wait at their stop.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		return ErrStarted
	}
	g.started = true
	parts := g.parts
	g.mu.Unlock()

	base := context.WithoutCancel(ctx)
	failed := make(chan error, len(parts))
	// The last part's context also ends when ctx does or a part fails:
	// it stops first, and Run's goroutine is running it.
	lastCtx, stopLast := context.WithCancel(base)
	defer stopLast()
	defer context.AfterFunc(ctx, stopLast)()
	fail := func(err error) {
		failed <- err
		stopLast()
	}

	type running struct {
		cancel context.CancelFunc
		wait   func()
	}
	rs := make([]running, 0, len(parts))
	var inline Runnable // the last part, run below
	for i, p := range parts {
		if s, ok := p.r.(Starter); ok {
			pctx, cancel := context.WithCancel(base)
			wait, err := s.Start(pctx)
			if err != nil {
				cancel()
				fail(fmt.Errorf("%s: %w", p.name, err))
				break
			}
			rs = append(rs, running{cancel: cancel, wait: wait})
			continue
		}
		if i == len(parts)-1 {
			inline = p.r
			continue
		}
		pctx, cancel := context.WithCancel(base)
		done := make(chan struct{})
		rs = append(rs, running{cancel: cancel, wait: func() { <-done }})
		go func() {
			defer close(done)
			if err := p.r.Run(pctx); err != nil {
				fail(fmt.Errorf("%s: %w", p.name, err))
			}
		}()
	}

	var err error
	if inline != nil && lastCtx.Err() == nil {
		if lerr := inline.Run(lastCtx); lerr != nil {
			select {
			case err = <-failed: // the first failure, which stopped it
			default:
				err = fmt.Errorf("%s: %w", parts[len(parts)-1].name, lerr)
			}
		}
	}
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-failed:
		}
	}
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].cancel()
		rs[i].wait()
	}
	if err == nil {
		select {
		case err = <-failed: // a part that failed as it stopped
		default:
		}
	}
	return err
}

// Starter is a Runnable that needs no goroutine of its own while it runs:
// its work runs on goroutines it starts when it has work, or on a shared
// periodic.Driver's. Start starts the part and returns at once; the part
// runs until ctx ends, and wait then blocks until it has stopped, as Run
// would have returned. An error from Start is the part's failure, as
// Run's would be; the part did not start. Group.Run calls Start rather
// than Run: a thousand agents in one process (hollow nodes) then hold no
// goroutine for their parts that wait.
type Starter interface {
	Runnable
	Start(ctx context.Context) (wait func(), err error)
}

// Until is a Starter's Run: it starts s, waits until ctx ends and then
// until s has stopped. It returns Start's error, else nil.
func Until(ctx context.Context, s Starter) error {
	wait, err := s.Start(ctx)
	if err != nil {
		return err
	}
	<-ctx.Done()
	wait()
	return nil
}
