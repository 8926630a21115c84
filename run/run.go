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

// Run starts every part, in order, each in a goroutine of its own, and
// waits until ctx ends or a part fails. It then stops the parts in
// reverse order, each after the parts that follow it have returned, and
// returns when all have: nil when ctx ended, else the first error.
// The parts' contexts carry ctx's values but end only at their stop.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		return ErrStarted
	}
	g.started = true
	parts := g.parts
	g.mu.Unlock()

	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	base := context.WithoutCancel(ctx)
	failed := make(chan error, len(parts))
	rs := make([]running, len(parts))
	for i, p := range parts {
		pctx, cancel := context.WithCancel(base)
		rs[i] = running{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(rs[i].done)
			if err := p.r.Run(pctx); err != nil {
				failed <- fmt.Errorf("%s: %w", p.name, err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].cancel()
		<-rs[i].done
	}
	if err == nil {
		select {
		case err = <-failed: // a part that failed as it stopped
		default:
		}
	}
	return err
}
