package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// criWriter writes a container's log as a CRI runtime's log writer does:
// to the log's path, appending, until asked to reopen it (after the
// rotator renamed it).
type criWriter struct {
	path    string
	mu      sync.Mutex
	f       *os.File
	written int64
}

func (w *criWriter) open() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f = f
	return nil
}

func (w *criWriter) write(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.f.Write(b)
	w.written += int64(n)
	return err
}

func (w *criWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.f.Close()
}

// writerRuntime runs one container whose log w writes.
type writerRuntime struct {
	id string
	w  *criWriter
}

func (r *writerRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: r.id, State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, nil
}

func (r *writerRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, LogPath: r.w.path}}, nil
}

func (r *writerRuntime) ReopenContainerLog(context.Context, string) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.w.open()
}

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

// dirSize is the size of the files in d.
func dirSize(d string) (int64, int) {
	es, err := os.ReadDir(d)
	if err != nil {
		return 0, 0
	}
	var n int64
	for _, e := range es {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n, len(es)
}

// TestRotatorBoundsFullSpeedWriter: a container writing its log as fast
// as it can, in lines or in 16 KiB partial entries (a CRI runtime's
// entries for a line without a newline), with the defaults (MaxSize 10Mi,
// MaxFiles 5, Period 10s): while three times the bound is written, the
// log's directory stays under twice MaxSize × MaxFiles, every compressed
// file is whole, and no more than MaxFiles logs are left (with the file
// being compressed).
func TestRotatorBoundsFullSpeedWriter(t *testing.T) {
	const (
		maxSize  = DefaultMaxSize
		maxFiles = DefaultMaxFiles
		bound    = maxSize * maxFiles
		total    = 3 * bound
	)
	for _, tc := range []struct {
		name  string
		entry []byte
	}{
		{"lines", []byte("2026-01-01T00:00:00.000000000Z stdout F " + strings.Repeat("y", 400) + "\n")},
		{"no newlines", []byte("2026-01-01T00:00:00.000000000Z stdout P " + strings.Repeat("n", 16<<10) + "\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := shmDir(t)
			w := &criWriter{path: filepath.Join(d, "0.log")}
			if err := w.open(); err != nil {
				t.Fatal(err)
			}
			defer w.close()
			r, err := New(&writerRuntime{id: "c1", w: w}, Options{
				MaxSize: *resource.NewQuantity(maxSize, resource.BinarySI), MaxFiles: maxFiles, Logger: testr.New(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			runDone := make(chan error, 1)
			go func() { runDone <- r.Run(ctx) }()

			// The writer writes total bytes, or stops early when the
			// directory is far past the bound.
			var peak int64
			stop := make(chan struct{})
			wrote := make(chan error, 1)
			go func() {
				defer close(wrote)
				// An entry a write, as a CRI runtime's log writer does.
				buf := tc.entry
				for w.written < total {
					select {
					case <-stop:
						return
					default:
					}
					if err := w.write(buf); err != nil {
						wrote <- err
						return
					}
				}
			}()
			sampling := true
			for sampling {
				select {
				case err := <-wrote:
					if err != nil {
						t.Fatal(err)
					}
					sampling = false
				default:
				}
				size, _ := dirSize(d)
				peak = max(peak, size)
				time.Sleep(100 * time.Microsecond) // leaves the writer and the rotator the CPUs
				if size > 4*bound {
					close(stop)
					<-wrote
					break
				}
			}
			cancel()
			if err := <-runDone; err != nil {
				t.Errorf("Run: %v", err)
			}
			t.Logf("wrote %d MiB; peak of the log directory %.1f MiB, bound %d MiB (MaxSize %d MiB × MaxFiles %d)",
				w.written>>20, float64(peak)/(1<<20), bound>>20, maxSize>>20, maxFiles)
			if peak >= 2*bound {
				t.Fatalf("the log directory reached %d bytes, want under twice the bound %d; left: %v", peak, 2*bound, dir(t, d))
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
		})
	}
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
