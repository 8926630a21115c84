package run_test

import (
	"context"
	"errors"
	goruntime "runtime"
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

// starter is a run.Starter that logs its start and stop; its work needs no
// goroutine.
type starter struct {
	r    *recorder
	name string
	err  error
}

func (s starter) Start(ctx context.Context) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	s.r.add("start " + s.name)
	stopped := make(chan struct{})
	context.AfterFunc(ctx, func() {
		s.r.add("stop " + s.name)
		close(stopped)
	})
	return func() { <-stopped }, nil
}

func (s starter) Run(ctx context.Context) error { return run.Until(ctx, s) }

// Starters start in the order of the parts and stop in reverse, like the
// others, and hold no goroutine; the last part runs on Run's goroutine.
func TestGroupStarters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var g run.Group
		g.Add("a", starter{r: &r, name: "a"})
		g.Add("b", r.part("b", nil))
		g.Add("c", starter{r: &r, name: "c"})
		g.Add("d", r.part("d", nil))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		before := goruntime.NumGoroutine()
		go func() { done <- g.Run(ctx) }()
		synctest.Wait()
		// Run's (running d) and b's.
		if n := goruntime.NumGoroutine() - before; n != 2 {
			t.Errorf("%d goroutines while the group runs, want 2", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		if i, j := slices.Index(r.log, "start a"), slices.Index(r.log, "start c"); i < 0 || j < i {
			t.Errorf("starts %v, want a before c", r.log)
		}
		if want := []string{"stop d", "stop c", "stop b", "stop a"}; !slices.Equal(r.log[4:], want) {
			t.Fatalf("log %v, want stops %v", r.log, want)
		}
	})
}

// A Starter that cannot start fails the group: the parts started before
// it stop, the later ones never start.
func TestGroupStarterFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var g run.Group
		boom := errors.New("boom")
		g.Add("a", r.part("a", nil))
		g.Add("b", starter{r: &r, name: "b", err: boom})
		g.Add("c", r.part("c", nil))
		err := g.Run(t.Context())
		if !errors.Is(err, boom) || err.Error() != "b: boom" {
			t.Fatalf("Run = %v, want b: boom", err)
		}
		synctest.Wait()
		if want := []string{"start a", "stop a"}; !slices.Equal(r.log, want) {
			t.Fatalf("log %v, want %v", r.log, want)
		}
	})
}

// The last part, which runs on Run's goroutine, failing stops the group
// with its error; another part failing stops it too.
func TestGroupLastPartFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var g run.Group
		boom := errors.New("boom")
		g.Add("a", r.part("a", nil))
		g.Add("b", r.part("b", boom))
		if err := g.Run(t.Context()); err == nil || err.Error() != "b: boom" {
			t.Fatalf("Run = %v, want b: boom", err)
		}
		if !slices.Contains(r.log, "stop a") {
			t.Fatalf("a did not stop: %v", r.log)
		}
	})
}

// Until runs a Starter as a Runnable: until ctx ends, then until it
// stopped; Start's error is Until's.
func TestUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- run.Until(ctx, starter{r: &r, name: "a"}) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Until returned %v before ctx ended", err)
		default:
		}
		cancel()
		if err := <-done; err != nil || !slices.Equal(r.log, []string{"start a", "stop a"}) {
			t.Fatalf("Until = %v, log %v", err, r.log)
		}
		boom := errors.New("boom")
		if err := run.Until(t.Context(), starter{r: &r, name: "b", err: boom}); !errors.Is(err, boom) {
			t.Fatalf("Until = %v, want boom", err)
		}
	})
}
