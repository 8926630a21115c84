package sources

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
)

// TestConfigRunGoroutines: Run merges its last source's snapshots on its
// own goroutine: with one source it holds two goroutines (its own and the
// source's), with two, four.
func TestConfigRunGoroutines(t *testing.T) {
	for _, tc := range []struct {
		sources []string
		want    int
	}{{[]string{APIServerSource}, 2}, {[]string{FileSource, APIServerSource}, 4}} {
		synctest.Test(t, func(t *testing.T) {
			c := NewConfig(ConfigOptions{})
			for _, name := range tc.sources {
				if err := c.Add(name, SourceFunc(idle)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- c.Run(ctx) }()
			synctest.Wait()
			var buf bytes.Buffer
			if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
				t.Fatal(err)
			}
			n := 0
			for g := range strings.SplitSeq(buf.String(), "\n\n") {
				if strings.Contains(g, "sources.(*Config).Run") {
					n++
				}
			}
			if n != tc.want {
				t.Errorf("%d sources: %d goroutines of Run, want %d", len(tc.sources), n, tc.want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
