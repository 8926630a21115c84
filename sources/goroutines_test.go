package sources

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
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
			if n := leakcheck.Goroutines("sources.(*Config)"); n != tc.want {
				t.Errorf("%d sources: %d goroutines of the Config, want %d", len(tc.sources), n, tc.want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// pusher is a Pusher whose snapshots the test pushes, from its own
// goroutine.
type pusher struct {
	push func(context.Context, []*v1.Pod)
	ctx  context.Context
}

func (p *pusher) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	return errors.New("Run called on a Pusher")
}

func (p *pusher) Start(ctx context.Context, push func(context.Context, []*v1.Pod)) (func(), error) {
	p.ctx, p.push = ctx, push
	return func() {}, nil
}

// TestConfigPusher: a Pusher source is started, not run: its pushes are
// merged into updates and mark it ready, and the Config holds no goroutine
// for it (Start: none at all; Run: its own).
func TestConfigPusher(t *testing.T) {
	for _, viaStart := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c := NewConfig(ConfigOptions{})
			p := &pusher{}
			if err := c.Add(APIServerSource, p); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			want := 1
			if viaStart {
				wait, err := c.Start(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want = 0
				go func() { <-ctx.Done(); wait(); done <- nil }()
			} else {
				go func() { done <- c.Run(ctx) }()
			}
			synctest.Wait()
			if n := leakcheck.Goroutines("sources.(*Config)"); n != want {
				t.Errorf("Start=%v: %d goroutines of the Config, want %d", viaStart, n, want)
			}
			if c.SourcesReady() {
				t.Fatal("ready before the first push")
			}
			p.push(p.ctx, []*v1.Pod{testPod("a")})
			if u := <-c.Updates(); u.Op != Add || len(u.Pods) != 1 || u.Source != APIServerSource {
				t.Errorf("update %+v, want an ADD of one pod from %s", u, APIServerSource)
			}
			if !c.SourcesReady() {
				t.Error("not ready after the first push")
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
