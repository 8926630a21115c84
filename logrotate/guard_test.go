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
		const maxSize = 64 << 10
		entry := []byte("2026-01-01T00:00:00.000000000Z stdout P " + strings.Repeat("n", 1000) + "\n")
		d := t.TempDir()
		log := filepath.Join(d, "0.log")
		rotated := log + ".20260101-000000"
		held := bytes.Repeat(entry, maxSize/len(entry)+1) // past MaxSize: rotated
		if err := os.WriteFile(rotated, held, 0o640); err != nil {
			t.Fatal(err)
		}
		// The runtime's file, still open on the rotated log.
		w, err := os.OpenFile(rotated, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		r, err := New(&fakeRuntime{}, Options{MaxSize: *resource.NewQuantity(maxSize, resource.BinarySI), Clock: clk, Logger: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		g := &guard{r: r, id: "c1", log: log, rotated: rotated, keep: maxSize, limit: 2 * maxSize}
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
