package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// writerEnv, set to a log's path, makes the test binary a container's
// log writer (writeLog); writerEntryEnv is the entry it writes and
// writerTotalEnv how many bytes.
const (
	writerEnv      = "NODEKIT_LOGROTATE_TEST_WRITER"
	writerEntryEnv = "NODEKIT_LOGROTATE_TEST_ENTRY"
	writerTotalEnv = "NODEKIT_LOGROTATE_TEST_TOTAL"
	// writerLagEnv is how many bytes the writer writes to a renamed log
	// before it reopens the log (a runtime slow to reopen).
	writerLagEnv = "NODEKIT_LOGROTATE_TEST_LAG"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		total, _ := strconv.ParseInt(os.Getenv(writerTotalEnv), 10, 64)
		lag, _ := strconv.ParseInt(os.Getenv(writerLagEnv), 10, 64)
		if err := writeLog(path, []byte(os.Getenv(writerEntryEnv)), total, lag); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeLog writes a container's log as a CRI runtime's log writer does,
// in a process of its own: once a byte on stdin starts it, an entry a
// write, as fast as it can, appending to the log's path, total bytes.
// Another byte on stdin asks it to reopen the
// log (the rotator renamed it), which it does between two writes once it
// wrote lag more bytes (as a runtime slow to reopen writes on to the
// renamed log) and acknowledges with a byte on stdout; stdin's end stops
// it.
func writeLog(path string, entry []byte, total, lag int64) error {
	open := func() (*os.File, error) { return os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640) }
	f, err := open()
	if err != nil {
		return err
	}
	// The first byte starts the writes.
	b := make([]byte, 1)
	if _, err := os.Stdin.Read(b); err != nil {
		return f.Close()
	}
	// Then stdin is read between two writes, without waiting.
	if err := syscall.SetNonblock(0, true); err != nil {
		return err
	}
	reopenAt := int64(-1) // when asked, the count at which it reopens
	for written := int64(0); written < total; {
		switch n, err := syscall.Read(0, b); {
		case n == 0 && err == nil:
			return f.Close() // stdin's end
		case n == 1:
			reopenAt = written + lag
		case err != syscall.EAGAIN:
			return err
		}
		if reopenAt >= 0 && written >= reopenAt {
			reopenAt = -1
			f.Close()
			if f, err = open(); err != nil {
				return err
			}
			os.Stdout.Write([]byte{1})
		}
		n, err := f.Write(entry)
		if err != nil {
			return err
		}
		written += int64(n)
	}
	return f.Close()
}

// procWriter is a writeLog process.
type procWriter struct {
	path string
	cmd  *exec.Cmd
	mu   sync.Mutex // one reopen at a time
	in   io.WriteCloser
	out  io.Reader
	done chan error
}

func startWriter(t *testing.T, path string, entry []byte, total, lag int64) *procWriter {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path, writerEntryEnv+"="+string(entry), writerTotalEnv+"="+strconv.FormatInt(total, 10), writerLagEnv+"="+strconv.FormatInt(lag, 10))
	cmd.Stderr = os.Stderr
	w := &procWriter{path: path, cmd: cmd, done: make(chan error, 1)}
	var err error
	if w.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if w.out, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return w
}

// reopen asks the writer to reopen its log and waits until it did.
func (w *procWriter) reopen() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.in.Write([]byte{1}); err != nil {
		return err
	}
	_, err := io.ReadFull(w.out, make([]byte, 1))
	return err
}

// writerRuntime runs one container whose log w writes.
type writerRuntime struct {
	id string
	w  *procWriter
}

func (r *writerRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: r.id, State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, nil
}

func (r *writerRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, LogPath: r.w.path}}, nil
}

func (r *writerRuntime) ReopenContainerLog(context.Context, string) error { return r.w.reopen() }

// shmDir is a temporary directory on /dev/shm when there is one, so that
// the writer's hundreds of MiB stay off the disk.
func shmDir(t *testing.T) string {
	d, err := os.MkdirTemp("/dev/shm", "nodekit-logrotate-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// dirSize is the size of the files in d, and their names and sizes.
func dirSize(d string) (int64, []string) {
	es, err := os.ReadDir(d)
	if err != nil {
		return 0, nil
	}
	var n int64
	var listing []string
	for _, e := range es {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
			listing = append(listing, fmt.Sprintf("%s=%.1fMiB", e.Name(), float64(fi.Size())/(1<<20)))
		}
	}
	return n, listing
}

// TestRotatorBoundsFullSpeedWriter: a container writing its log as fast
// as it can, in lines or in 16 KiB partial entries (a CRI runtime's
// entries for a line without a newline), with the defaults (MaxSize 10Mi,
// MaxFiles 5, Period 10s): while three times the bound is written, the
// log's directory stays under twice MaxSize × MaxFiles, every compressed
// file is whole, and no more than MaxFiles logs are left (with the file
// being compressed). With a runtime slow to reopen the log, which writes
// twice the bound to the renamed log first (containerd took up to 0.8s at
// 200 MB/s), the directory stays under twice the bound too: the rotated
// file and the new log are cut back while the runtime reopens.
func TestRotatorBoundsFullSpeedWriter(t *testing.T) {
	const (
		maxSize  int64 = DefaultMaxSize
		maxFiles       = DefaultMaxFiles
		bound          = maxSize * maxFiles
		total          = 3 * bound
	)
	lines := []byte("2026-01-01T00:00:00.000000000Z stdout F " + strings.Repeat("y", 400) + "\n")
	noNewlines := []byte("2026-01-01T00:00:00.000000000Z stdout P " + strings.Repeat("n", 16<<10) + "\n")
	for _, tc := range []struct {
		name  string
		entry []byte
		lag   int64
	}{
		{"lines", lines, 0},
		{"no newlines", noNewlines, 0},
		{"lines, slow reopen", lines, 2 * bound},
		{"no newlines, slow reopen", noNewlines, 2 * bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				total := total + 2*tc.lag
				peak, listing := measureFullSpeed(t, tc.entry, maxSize, maxFiles, total, tc.lag)
				t.Logf("wrote %d MiB; peak of the log directory %.1f MiB, bound %d MiB (MaxSize %d MiB × MaxFiles %d)",
					total>>20, float64(peak)/(1<<20), bound>>20, maxSize>>20, maxFiles)
				if peak < 2*bound {
					break
				}
				// A stall of the whole test process (hundreds of
				// milliseconds on a loaded 2-core machine) lets the writer
				// run unchecked: one more measure, not more.
				if peak >= 4*bound || attempt == 2 {
					t.Fatalf("the log directory reached %d bytes, want under twice the bound %d; at the peak: %v", peak, 2*bound, listing)
				}
				t.Logf("past twice the bound, at the peak: %v; measuring again", listing)
			}
		})
	}
}

// measureFullSpeed runs a Rotator (MaxSize, MaxFiles) over a writer
// process writing entry at full speed, total bytes, and returns the peak
// size of the log's directory and its files then; it checks what Run
// leaves: no temporary file, whole compressed files, at most MaxFiles
// logs.
func measureFullSpeed(t *testing.T, entry []byte, maxSize int64, maxFiles int, total, lag int64) (int64, []string) {
	bound := maxSize * int64(maxFiles)
	d := shmDir(t)
	// The writer, a process of its own as a runtime's is, writes
	// total bytes; it is stopped early when the directory is far
	// past the bound.
	w := startWriter(t, filepath.Join(d, "0.log"), entry, total, lag)
	r, err := New(&writerRuntime{id: "c1", w: w}, Options{
		MaxSize: *resource.NewQuantity(maxSize, resource.BinarySI), MaxFiles: maxFiles, Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx) }()
	// The writes start once Run watches the log, as a container
	// starts writing once its runtime told the agent of it.
	for watched := false; !watched; time.Sleep(time.Millisecond) {
		r.mu.Lock()
		watched = r.checked > 0
		r.mu.Unlock()
	}
	if _, err := w.in.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	var peak int64
	var peakListing []string
	for sampling := true; sampling; {
		select {
		case err := <-w.done:
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			sampling = false
		default:
		}
		size, listing := dirSize(d)
		if size > peak {
			peakListing = listing
		}
		peak = max(peak, size)
		if size > 4*bound {
			w.in.Close()
			<-w.done
			break
		}
		time.Sleep(time.Millisecond) // a sample every millisecond
	}
	cancel()
	if err := <-runDone; err != nil {
		t.Errorf("Run: %v", err)
	}
	es, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	logs := 0
	for _, e := range es {
		p := filepath.Join(d, e.Name())
		switch {
		case strings.HasSuffix(p, tmpSuffix):
			t.Errorf("temporary file left after Run returned: %s", e.Name())
		case strings.HasSuffix(p, compressSuffix):
			logs++
			if err := gunzip(p); err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		default:
			logs++
		}
	}
	if logs > maxFiles {
		t.Errorf("%d logs left, want at most %d: %v", logs, maxFiles, dir(t, d))
	}
	return peak, peakListing
}

func gunzip(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, zr)
	if err == nil && n == 0 {
		err = errors.New("empty")
	}
	return err
}

// TestRotatedName: a rotation in the same second as an earlier one gets
// the next count, past the highest there, compressed or not.
func TestRotatedName(t *testing.T) {
	const log, ts = "/l/0.log", "20260101-000000"
	for _, tc := range []struct {
		matches []string
		want    string
	}{
		{nil, log + "." + ts},
		{[]string{log + ".20251231-235959.gz"}, log + "." + ts},
		{[]string{log + "." + ts + ".gz"}, log + "." + ts + ".1"},
		{[]string{log + "." + ts + ".gz", log + "." + ts + ".9.gz", log + "." + ts + ".10"}, log + "." + ts + ".11"},
		{[]string{log + "." + ts + ".3"}, log + "." + ts + ".4"},
	} {
		if got := rotatedName(log, ts, tc.matches); got != tc.want {
			t.Errorf("rotatedName(%v) = %s, want %s", tc.matches, got, tc.want)
		}
	}
}

// TestRotatorKeepsTheBytesOfMaxFiles: when the log and the rotated files
// pass MaxSize × MaxFiles (rotated late, past MaxSize), a rotation
// removes the oldest rotated files until they fit, beside the count.
func TestRotatorKeepsTheBytesOfMaxFiles(t *testing.T) {
	d := t.TempDir()
	log := filepath.Join(d, "0.log")
	rt := &fakeRuntime{logs: map[string]string{"c1": log}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, err := New(rt, Options{MaxFiles: 5, MaxSize: resource.MustParse("1Ki"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		size int
	}{{"0.log.20251231-000000.gz", 2000}, {"0.log.20251231-000100.gz", 100}, {"0.log.20251231-000200", 1500}, {"0.log", 3000}} {
		if err := os.WriteFile(filepath.Join(d, f.name), make([]byte, f.size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	// 5 × 1 KiB = 5120 bytes: the log (3000), the newest rotated (1500,
	// then compressed) and the 100 bytes fit once the oldest 2000 went.
	want := []string{"0.log", "0.log.20251231-000100.gz", "0.log.20251231-000200.gz", "0.log.20260101-000000"}
	if diff := cmp.Diff(want, dir(t, d)); diff != "" {
		t.Errorf("after the rotation (-want +got):\n%s", diff)
	}
}

// TestRotatorDropsWaitingCompressionAndWarns: a rotated file still waiting
// for the compressor when a newer one of the same log comes is dropped
// (another log's waits on), and the agent warns once a minute at most,
// with the count since the last warning.
func TestRotatorDropsWaitingCompressionAndWarns(t *testing.T) {
	d := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var warnings []string
	logger := funcr.New(func(prefix, args string) { warnings = append(warnings, args) }, funcr.Options{})
	r, err := New(&fakeRuntime{}, Options{Clock: clk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	r.compressing = true // no compressor runs: every file waits
	log, other := filepath.Join(d, "0.log"), filepath.Join(d, "1.log")
	var files []string
	for _, f := range []string{other + ".20260101-000000", log + ".20260101-000000", log + ".20260101-000001", log + ".20260101-000002", log + ".20260101-000003"} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	r.enqueue("c2", other, files[0])
	r.enqueue("c1", log, files[1])
	r.enqueue("c1", log, files[2]) // drops files[1], warns
	r.enqueue("c1", log, files[3]) // drops files[2], within the minute
	clk.Step(time.Minute)
	r.enqueue("c1", log, files[4]) // drops files[3], warns with 2
	if diff := cmp.Diff([]string{filepath.Base(files[4]), filepath.Base(files[0])}, dir(t, d)); diff != "" {
		t.Errorf("files left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]queued{{other, files[0]}, {log, files[4]}}, r.queue, cmp.AllowUnexported(queued{})); diff != "" {
		t.Errorf("queue (-want +got):\n%s", diff)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], `"droppedUncompressed"=1`) || !strings.Contains(warnings[1], `"droppedUncompressed"=2`) {
		t.Errorf("warnings: %q", warnings)
	}
}

// slowRuntime runs containers whose logs are in logs; reopening the log
// of slow waits for release.
type slowRuntime struct {
	logs    map[string]string
	slow    string
	release chan struct{}
	mu      sync.Mutex
	waiting bool
}

func (r *slowRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var out []*runtimeapi.Container
	for id := range r.logs {
		out = append(out, &runtimeapi.Container{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	return out, nil
}

func (r *slowRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, LogPath: r.logs[id]}}, nil
}

func (r *slowRuntime) ReopenContainerLog(ctx context.Context, id string) error {
	if id == r.slow {
		r.mu.Lock()
		r.waiting = true
		r.mu.Unlock()
		select {
		case <-r.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return os.WriteFile(r.logs[id], nil, 0o644)
}

// TestRunRotatesBesideASlowReopen: while the runtime takes its time to
// reopen one container's log, Run rotates another's that outgrew
// MaxSize; the slow one's rotation completes once the runtime reopened.
func TestRunRotatesBesideASlowReopen(t *testing.T) {
	d := t.TempDir()
	rt := &slowRuntime{logs: map[string]string{"slow": filepath.Join(d, "slow.log"), "fast": filepath.Join(d, "fast.log")}, slow: "slow", release: make(chan struct{})}
	for _, p := range rt.logs {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := New(rt, Options{MaxSize: resource.MustParse("1Ki"), Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 10s: %s", what)
			}
		}
	}
	eventually("Run's first pass", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.checked >= 2 })
	appendTo(t, rt.logs["slow"], 2048)
	eventually("the slow log renamed and its reopen waiting", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.waiting })
	appendTo(t, rt.logs["fast"], 2048)
	rotatedOf := func(name string) []string {
		m, _ := filepath.Glob(filepath.Join(d, name+".log.*"))
		return m
	}
	eventually("the other log rotated while the slow reopen waits", func() bool { return len(rotatedOf("fast")) == 1 })
	if fi, err := os.Stat(rt.logs["slow"]); err == nil {
		t.Errorf("the slow log is back (%d bytes) before its reopen", fi.Size())
	}
	close(rt.release)
	eventually("the slow log reopened", func() bool { _, err := os.Stat(rt.logs["slow"]); return err == nil })
	if got := rotatedOf("slow"); len(got) != 1 {
		t.Errorf("rotated slow logs: %v", got)
	}
}
