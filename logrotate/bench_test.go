package logrotate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// benchLogs makes n empty container logs laid out as the kubelet's
// (<dir>/<ns>_<pod>_<uid>/<container>/0.log), on /dev/shm when there is
// one (as the agent benchmarks keep their logs), and returns their paths
// by container ID.
func benchLogs(b *testing.B, n int) map[string]string {
	b.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "nodekit-logrotate-")
	if err != nil {
		dir = b.TempDir()
	} else {
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	logs := make(map[string]string, n)
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("default_pod-%d_%08d-0000-0000-0000-000000000000", i, i), "app")
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(d, "0.log")
		if err := os.WriteFile(p, []byte("hello\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		logs[fmt.Sprintf("%064d", i)] = p
	}
	return logs
}

// BenchmarkPass is the CPU of one rotation pass over 10,000 running
// containers none of whose logs needs rotating, beside its floor:
//   - stat-floor: one stat per log, what a pass that checks every log
//     cannot go below;
//   - unwatched: a pass checking every log (RotateAll alone, or a file
//     system that does not tell of writes), the kubelet's way;
//   - watched/written=N%: a pass while the logs are watched, N% of them
//     written to since the last pass (each write then costs a stat and
//     re-arming the log's watch at the next pass).
//
// The runtime answers its list from memory, as the agent's PLEG cache
// does.
func BenchmarkPass(b *testing.B) {
	const n = 10000
	logs := benchLogs(b, n)
	b.Run("stat-floor", func(b *testing.B) {
		for b.Loop() {
			for _, p := range logs {
				if _, err := os.Stat(p); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/log")
	})
	newRotator := func(b *testing.B) *Rotator {
		r, err := New(&countingRuntime{fakeRuntime: &fakeRuntime{logs: logs}, ok: true}, Options{MaxSize: resource.MustParse("1Mi")})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	b.Run("unwatched", func(b *testing.B) {
		r := newRotator(b)
		if err := r.RotateAll(b.Context()); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := r.RotateAll(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/log")
	})
	for _, pct := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("watched/written=%d%%", pct), func(b *testing.B) {
			r := newRotator(b)
			if err := r.startWatching(); err != nil {
				b.Skipf("files cannot be watched here: %v", err)
			}
			defer r.stopWatching()
			if err := r.RotateAll(b.Context()); err != nil {
				b.Fatal(err)
			}
			var written []*os.File
			i := 0
			for _, p := range logs {
				if i*100 >= pct*n {
					break
				}
				i++
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				written = append(written, f)
			}
			checked := r.checked
			line := []byte("x\n")
			for b.Loop() {
				b.StopTimer()
				for _, f := range written {
					if _, err := f.WriteAt(line, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := r.RotateAll(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			if got, want := (r.checked-checked)/b.N, len(written); got != want {
				b.Fatalf("a pass checked %d logs, want %d", got, want)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/log")
		})
	}
}
