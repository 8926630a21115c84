package logrotate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestGuardCutsWhenReopened: what the runtime wrote to the rotated file
// after the guard's last tick (a loaded machine gave the guard no CPU
// while the runtime wrote on) is cut when the runtime reopened the log:
// the rotated file is left with what the log held when it was rotated,
// whole entries, and the new log within what the limit leaves. The
// guard's ticker (a fake clock's) never fires: only its first check and
// its last one run.
func TestGuardCutsWhenReopened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxSize = guardMaxSize
		entry := guardEntry
		g, w, _ := guardFixture(t)
		log, rotated := g.log, g.rotated
		done := make(chan struct{})
		ended := make(chan struct{})
		go func() {
			g.run(t.Context(), done)
			close(ended)
		}()
		synctest.Wait() // the first check, within the limit
		// The runtime writes on to the rotated file, then reopens the log
		// and writes to the new one.
		if _, err := w.Write(bytes.Repeat(entry, 10*maxSize/len(entry))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(log, bytes.Repeat(entry, 2*maxSize/len(entry)), 0o640); err != nil {
			t.Fatal(err)
		}
		close(done)
		<-ended
		rfi, err := os.Stat(rotated)
		if err != nil {
			t.Fatal(err)
		}
		nfi, err := os.Stat(log)
		if err != nil {
			t.Fatal(err)
		}
		// The rotated file keeps the whole entries within MaxSize of what
		// the log held.
		if want := int64(maxSize / len(entry) * len(entry)); rfi.Size() != want {
			t.Errorf("rotated file %d bytes, want %d (the whole entries within MaxSize)", rfi.Size(), want)
		}
		if total := rfi.Size() + nfi.Size(); total > g.limit {
			t.Errorf("rotated file and new log %d bytes together, want at most the limit %d", total, g.limit)
		}
		if nfi.Size()%int64(len(entry)) != 0 {
			t.Errorf("new log %d bytes: not whole entries of %d", nfi.Size(), len(entry))
		}
	})
}

// TestGuardCutsWhileAPassHoldsTheLock: a pass holding the Rotator's lock
// (a rotation's file work or a runtime call, slow on a loaded machine)
// does not stop the guard's cuts. The guard used to take the lock after
// each cut to count it, and cut nothing more until the pass ended, while
// the runtime wrote on (a CI run once showed a new log of 100.8 MiB beside
// a rotated file cut to 10 MiB, which such a wait would give).
func TestGuardCutsWhileAPassHoldsTheLock(t *testing.T) {
	const maxSize = guardMaxSize
	entry := guardEntry
	g, w, clk := guardFixture(t)
	r, rotated := g.r, g.rotated
	r.mu.Lock() // a pass, for the whole test
	defer r.mu.Unlock()
	done := make(chan struct{})
	ended := make(chan int64)
	go func() { ended <- g.run(t.Context(), done) }()
	// Two rounds of writes past the limit, each followed by a tick: the
	// second round is cut too.
	for round := range 2 {
		if _, err := w.Write(bytes.Repeat(entry, 4*maxSize/len(entry))); err != nil {
			t.Fatal(err)
		}
		// The guard's ticker is the fake clock's: wait for the guard to
		// wait on it, then tick.
		if !clk.HasWaiters() {
			waitFor(t, clk.HasWaiters)
		}
		clk.Step(guardEvery)
		waitFor(t, func() bool {
			fi, err := os.Stat(rotated)
			return err == nil && fi.Size() <= maxSize
		})
		t.Logf("round %d cut", round)
	}
	close(done)
	select {
	case cut := <-ended:
		if want := int64(8 * maxSize / len(entry) * len(entry)); cut < want {
			t.Errorf("guard reports %d bytes cut, want at least the %d written past the rotated file's size", cut, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not end while a pass held the lock")
	}
}

// waitFor waits up to 10s for cond, and fails the test past that: a
// guard that cuts does so within milliseconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("gave up after 10s")
		}
	}
}

// guardMaxSize is the guard tests' MaxSize, guardEntry their runtime's
// entry (a 16 KiB line's partial entries, shorter).
const guardMaxSize = 64 << 10

var guardEntry = []byte("2026-01-01T00:00:00.000000000Z stdout P " + strings.Repeat("n", 1000) + "\n")

// guardFixture makes a rotated log just past guardMaxSize, a file open on
// it for appends (the runtime's, until it reopened the log), and a
// Rotator on a fake clock, and returns the guard of that rotation.
func guardFixture(t *testing.T) (g *guard, w *os.File, clk *clocktesting.FakeClock) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "0.log")
	rotated := log + ".20260101-000000"
	held := bytes.Repeat(guardEntry, guardMaxSize/len(guardEntry)+1) // past MaxSize: rotated
	if err := os.WriteFile(rotated, held, 0o640); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(rotated, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	clk = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, err := New(&fakeRuntime{}, Options{MaxSize: *resource.NewQuantity(guardMaxSize, resource.BinarySI), Clock: clk, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return &guard{r: r, id: "c1", log: log, rotated: rotated, keep: guardMaxSize, limit: 2 * guardMaxSize}, w, clk
}
