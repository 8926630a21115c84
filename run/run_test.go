package run_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/nodekit/nodekit/run"
)

// recorder logs the starts and stops of parts.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) part(name string, err error) run.Runnable {
	return run.Func(func(ctx context.Context) error {
		r.add("start " + name)
		if err != nil {
			return err
		}
		<-ctx.Done()
		r.add("stop " + name)
		return nil
	})
}

func TestGroupStopsInReverse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var g run.Group
		for _, n := range []string{"a", "b", "c"} {
			if err := g.Add(n, r.part(n, nil)); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Add("nil", nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		synctest.Wait()
		if err := g.Add("late", r.part("late", nil)); !errors.Is(err, run.ErrStarted) {
			t.Fatalf("Add after Run = %v, want ErrStarted", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		stops := r.log[3:]
		if want := []string{"stop c", "stop b", "stop a"}; !slices.Equal(stops, want) {
			t.Fatalf("stops = %v, want %v", stops, want)
		}
		if err := g.Run(t.Context()); !errors.Is(err, run.ErrStarted) {
			t.Fatalf("second Run = %v, want ErrStarted", err)
		}
	})
}

func TestGroupStopsOnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var g run.Group
		boom := errors.New("boom")
		g.Add("a", r.part("a", nil))
		g.Add("b", r.part("b", boom))
		g.Add("c", r.part("c", nil))
		err := g.Run(t.Context())
		if !errors.Is(err, boom) || err.Error() != "b: boom" {
			t.Fatalf("Run = %v, want b: boom", err)
		}
		if !slices.Contains(r.log, "stop a") || !slices.Contains(r.log, "stop c") {
			t.Fatalf("the other parts did not stop: %v", r.log)
		}
	})
}

// A part that finishes early leaves the others running.
func TestGroupPartFinishesEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var g run.Group
		g.Add("once", run.Func(func(context.Context) error { return nil }))
		g.Add("a", r.part("a", nil))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Run returned %v after a part finished", err)
		default:
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
