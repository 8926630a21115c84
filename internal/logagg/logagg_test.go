package logagg

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/nodekit/nodekit/internal/leakcheck"
)

// sink records the lines logged, as "<prefix> <args>".
type sink struct {
	mu    sync.Mutex
	lines []string
}

func (s *sink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, args)
	}, funcr.Options{})
}

func (s *sink) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines
	s.lines = nil
	return l
}

// clock is a fake clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestAggregator(t *testing.T) {
	s := &sink{}
	c := &clock{t: time.Unix(1000, 0)}
	a := New(s.logger(), Options{Interval: time.Minute, Now: c.now})
	boom := errors.New("boom")

	// A flood: the first line is logged, the rest within the interval are
	// counted.
	for i := range 1000 {
		a.Error(boom, "event channel full", "dropped", i)
		c.advance(10 * time.Millisecond) // 10 s in all
	}
	want := []string{`"msg"="event channel full" "error"="boom" "dropped"=0`}
	if diff := cmp.Diff(want, s.take()); diff != "" {
		t.Fatalf("during the flood (-want +got):\n%s", diff)
	}
	// Flush before the interval has passed logs nothing.
	a.Flush()
	if got := s.take(); len(got) != 0 {
		t.Fatalf("Flush within the interval logged %q", got)
	}
	// The next occurrence after the interval carries the count.
	c.advance(time.Minute)
	a.Error(boom, "event channel full", "dropped", 1000)
	want = []string{`"msg"="event channel full" "error"="boom" "dropped"=1000 "suppressed"=999 "interval"="1m0s"`}
	if diff := cmp.Diff(want, s.take()); diff != "" {
		t.Fatalf("after the interval (-want +got):\n%s", diff)
	}

	// A burst that ends: Flush logs its count once the interval has
	// passed, with the last occurrence's values, then nothing more.
	a.Error(boom, "event channel full", "dropped", 1001)
	a.Error(boom, "event channel full", "dropped", 1002)
	c.advance(time.Minute)
	a.Flush()
	a.Flush()
	want = []string{`"msg"="event channel full" "error"="boom" "dropped"=1002 "suppressed"=2 "interval"="1m0s"`}
	if diff := cmp.Diff(want, s.take()); diff != "" {
		t.Fatalf("Flush after a burst (-want +got):\n%s", diff)
	}

	// Other messages and other keys are aggregated apart.
	a.Error(nil, "relist failed")
	a.ErrorFor("pod-a", boom, "Pod sync failed", "pod", "a")
	a.ErrorFor("pod-b", boom, "Pod sync failed", "pod", "b")
	a.ErrorFor("pod-a", boom, "Pod sync failed", "pod", "a")
	want = []string{
		`"msg"="relist failed" "error"=null`,
		`"msg"="Pod sync failed" "error"="boom" "pod"="a"`,
		`"msg"="Pod sync failed" "error"="boom" "pod"="b"`,
	}
	if diff := cmp.Diff(want, s.take()); diff != "" {
		t.Fatalf("apart (-want +got):\n%s", diff)
	}
}

// TestAggregatorForgets checks that the lines that no longer occur are
// forgotten once their count is logged: the records stay bounded by the
// lines of one interval however many keys come and go.
func TestAggregatorForgets(t *testing.T) {
	s := &sink{}
	c := &clock{t: time.Unix(1000, 0)}
	a := New(s.logger(), Options{Interval: time.Minute, Now: c.now})
	for round := range 100 {
		for i := range 100 {
			a.ErrorFor(string(rune('a'+round))+string(rune(i)), nil, "Pod sync failed")
		}
		c.advance(time.Minute)
		a.Flush()
	}
	a.mu.Lock()
	n := len(a.lines)
	a.mu.Unlock()
	if n != 0 {
		t.Errorf("%d records kept after the lines stopped, want 0", n)
	}
	if got := len(s.take()); got != 100*100 {
		t.Errorf("%d lines, want %d (each key once)", got, 100*100)
	}
}

// TestAggregatorGivesBackRoom logs a line for each of many pods within an
// interval (a churn of pods failing their syncs), while one line recurs
// throughout: once the pods' lines are forgotten, the Aggregator gives
// back the room they took, rather than hold it for as long as it lives.
func TestAggregatorGivesBackRoom(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	a := New(logr.Discard(), Options{Interval: time.Minute, Now: c.now})
	err := errors.New("boom")
	churn := func(pods int) {
		for i := range pods {
			a.ErrorFor(fmt.Sprintf("uid-%d", i), err, "Pod sync failed")
		}
		for range 2 {
			c.advance(time.Minute)
			a.Error(err, "Relist failed") // recurs: never forgotten
			a.Flush()
		}
	}
	churn(10) // what the first lines make once
	before := leakcheck.LiveHeap()
	// Not more: each new line looks at every line held.
	const pods = 4000
	churn(pods)
	a.mu.Lock()
	n := len(a.lines)
	a.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d lines held after the pods' lines were forgotten, want 1", n)
	}
	// Some 80 bytes a line in the map: over 300 KiB kept.
	if after := leakcheck.LiveHeap(); after > before+64<<10 {
		t.Errorf("live heap %d KiB after %d lines came and went, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
	runtime.KeepAlive(a) // live while the heap is measured
}

func TestAggregatorNegativeInterval(t *testing.T) {
	s := &sink{}
	a := New(s.logger(), Options{Interval: -1})
	for range 3 {
		a.Error(nil, "x")
	}
	a.Flush()
	if got := len(s.take()); got != 3 {
		t.Errorf("%d lines, want 3", got)
	}
}

func TestAggregatorConcurrent(t *testing.T) {
	s := &sink{}
	a := New(s.logger(), Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				a.Error(nil, "x", "k", 1)
				a.Flush()
			}
		})
	}
	wg.Wait()
	if got := s.take(); len(got) != 1 {
		t.Errorf("%d lines within one interval, want 1", len(got))
	}
}
