package logs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

const benchLogSize = 100 << 20

func TestMain(m *testing.M) {
	code := m.Run()
	if benchLogPath != "" {
		os.RemoveAll(filepath.Dir(benchLogPath))
	}
	os.Exit(code)
}

var (
	benchLogOnce sync.Once
	benchLogPath string
	benchLogErr  error
)

// benchLog writes a 100 MiB CRI log file of 100-byte records (both
// streams, one in eight partial) once per run.
func benchLog(b *testing.B) string {
	benchLogOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodekit-logs-bench")
		if err != nil {
			benchLogErr = err
			return
		}
		benchLogPath = filepath.Join(dir, "0.log")
		f, err := os.Create(benchLogPath)
		if err != nil {
			benchLogErr = err
			return
		}
		w := bufio.NewWriter(f)
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		n := 0
		for i := 0; n < benchLogSize; i++ {
			stream, tag := "stdout", "F"
			if i%5 == 0 {
				stream = "stderr"
			}
			if i%8 == 0 {
				tag = "P"
			}
			l := fmt.Sprintf("%s %s %s line %09d %s\n", ts.Add(time.Duration(i)*time.Microsecond).Format(time.RFC3339Nano), stream, tag, i,
				"the quick brown fox jumps over the lazy dog 0123456789")
			n += len(l)
			w.WriteString(l)
		}
		if err := w.Flush(); err != nil {
			benchLogErr = err
		}
		if err := f.Close(); err != nil {
			benchLogErr = err
		}
	})
	if benchLogErr != nil {
		b.Fatal(benchLogErr)
	}
	return benchLogPath
}

// BenchmarkRead100MiB reads a 100 MiB CRI log file as kubectl logs does
// (both streams, no options); BenchmarkFileCopy100MiB copies the same file
// to the same sink, the floor to compare with.
func BenchmarkRead100MiB(b *testing.B) {
	p := benchLog(b)
	for _, ts := range []bool{false, true} {
		b.Run(fmt.Sprintf("timestamps=%v", ts), func(b *testing.B) {
			b.SetBytes(benchLogSize)
			b.ReportAllocs()
			for b.Loop() {
				opts := NewOptions(&v1.PodLogOptions{Timestamps: ts}, time.Now())
				if err := Read(b.Context(), p, "id", opts, nil, io.Discard, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFileCopy100MiB(b *testing.B) {
	p := benchLog(b)
	b.SetBytes(benchLogSize)
	b.ReportAllocs()
	for b.Loop() {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		// io.Discard would take the file's own WriteTo shortcut.
		if _, err := io.Copy(struct{ io.Writer }{io.Discard}, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
