// Package sourcestest checks that a sources.Source behaves as the merge
// expects: a conformance suite for custom sources.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		sourcestest.SourceSuite(t, func(t *testing.T) sources.Source {
//			src, err := mysource.New(mysource.Options{...})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return src
//		})
//	}
//
// The suite checks goroutine leaks with goleak: do not run it in parallel
// with other tests of the same package.
package sourcestest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/sources"
)

// Timeout bounds every wait of the suite.
const Timeout = 5 * time.Second

// SourceSuite runs the checks every Source must pass. newSource returns a
// fresh Source for each check, set up so that it delivers its first
// snapshot promptly (within Timeout) once run.
//
// The checks: the first snapshot arrives; Run returns nil soon after its
// context ends, also while it is blocked sending to a channel nobody reads;
// nothing is sent after Run returned; and every goroutine Run started has
// exited when it returns.
func SourceSuite(t *testing.T, newSource func(t *testing.T) sources.Source) {
	t.Run("FirstSnapshot", func(t *testing.T) {
		src := newSource(t)
		ctx, cancel := context.WithCancel(t.Context())
		snaps := make(chan []*v1.Pod)
		done := run(ctx, src, snaps)
		select {
		case <-snaps:
		case <-time.After(Timeout):
			t.Errorf("no first snapshot within %v", Timeout)
		}
		cancel()
		waitReturn(t, done)
	})

	t.Run("ReturnsNilOnCancel", func(t *testing.T) {
		src := newSource(t)
		ctx, cancel := context.WithCancel(t.Context())
		snaps := make(chan []*v1.Pod, 100)
		done := run(ctx, src, snaps)
		select {
		case <-snaps:
		case <-time.After(Timeout):
			t.Fatalf("no first snapshot within %v", Timeout)
		}
		cancel()
		waitReturn(t, done)
		n := len(snaps)
		time.Sleep(100 * time.Millisecond)
		if len(snaps) != n {
			t.Errorf("%d snapshots sent after Run returned", len(snaps)-n)
		}
	})

	t.Run("ReturnsWhileBlockedSending", func(t *testing.T) {
		src := newSource(t)
		ctx, cancel := context.WithCancel(t.Context())
		// Nobody reads: the first send blocks until ctx ends.
		done := run(ctx, src, make(chan []*v1.Pod))
		time.Sleep(100 * time.Millisecond)
		cancel()
		waitReturn(t, done)
	})

	t.Run("NoGoroutineLeft", func(t *testing.T) {
		src := newSource(t)
		ignore := goleak.IgnoreCurrent()
		ctx, cancel := context.WithCancel(t.Context())
		snaps := make(chan []*v1.Pod, 100)
		done := run(ctx, src, snaps)
		select {
		case <-snaps:
		case <-time.After(Timeout):
			t.Fatalf("no first snapshot within %v", Timeout)
		}
		cancel()
		waitReturn(t, done)
		if err := leakcheck.Find(ignore); err != nil {
			t.Errorf("goroutines left after Run returned: %v", err)
		}
	})
}

func run(ctx context.Context, src sources.Source, snaps chan<- []*v1.Pod) <-chan error {
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, snaps) }()
	return done
}

func waitReturn(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v after cancel, want nil", err)
		}
	case <-time.After(Timeout):
		t.Fatalf("Run did not return within %v of cancel", Timeout)
	}
}
