package podruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// slowPuller is an ImageService whose pulls take a second (of the bubble's
// fake time) each and fail for images named "bad"; it records the pulls
// made and the most that ran at once.
type slowPuller struct {
	runtime.ImageService

	mu            sync.Mutex
	calls         map[string]int
	running, most int
	cancelled     int
}

func (s *slowPuller) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	s.mu.Lock()
	s.calls[spec.GetImage()]++
	s.running++
	s.most = max(s.most, s.running)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}()
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		s.mu.Lock()
		s.cancelled++
		s.mu.Unlock()
		return "", ctx.Err()
	}
	if spec.GetImage() == "bad" {
		return "", errors.New("manifest unknown")
	}
	return "sha256:" + spec.GetImage(), nil
}

func pullAll(t *testing.T, p *puller, ctx context.Context, images ...string) []string {
	t.Helper()
	out := make([]string, len(images))
	var wg sync.WaitGroup
	for i, img := range images {
		wg.Go(func() {
			ref, err := p.pull(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil)
			out[i] = fmt.Sprintf("%s %v", ref, err)
		})
	}
	wg.Wait()
	return out
}

// TestPullerCoalesces: pods that need an image at once share one pull,
// failure included; pulls of different images are serialized by default.
func TestPullerCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := &slowPuller{calls: map[string]int{}}
		p := newPuller(is, 0)
		images := []string{}
		for range 50 {
			images = append(images, "busybox", "bad")
		}
		start := time.Now()
		got := pullAll(t, p, t.Context(), images...)
		for i, g := range got {
			want := "sha256:busybox <nil>"
			if images[i] == "bad" {
				want = " manifest unknown"
			}
			if g != want {
				t.Fatalf("pull %d (%s) = %q, want %q", i, images[i], g, want)
			}
		}
		if is.calls["busybox"] != 1 || is.calls["bad"] != 1 {
			t.Errorf("PullImage calls %v, want one per image for 100 pods", is.calls)
		}
		if is.most != 1 || time.Since(start) != 2*time.Second {
			t.Errorf("%d pulls at once, all done in %v; want serialized: 1 at once, 2s", is.most, time.Since(start))
		}
		// Once a pull ended, the next pod pulls again.
		pullAll(t, p, t.Context(), "busybox")
		if is.calls["busybox"] != 2 {
			t.Errorf("busybox pulled %d times, want 2", is.calls["busybox"])
		}
	})
}

func TestPullerParallelLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := &slowPuller{calls: map[string]int{}}
		p := newPuller(is, 3)
		pullAll(t, p, t.Context(), "a", "b", "c", "d", "e", "f", "a", "b")
		if is.most != 3 {
			t.Errorf("%d pulls at once, want the limit 3", is.most)
		}
		if len(is.calls) != 6 {
			t.Errorf("PullImage calls %v, want one per image", is.calls)
		}
	})
}

// TestPullerCancel: a waiter that goes away does not cancel the pull the
// others wait for; when the last one goes, the pull is cancelled, and a
// later pod pulls anew.
func TestPullerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := &slowPuller{calls: map[string]int{}}
		p := newPuller(is, 1)
		early, cancelEarly := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var earlyErr, lateErr error
		var lateRef string
		wg.Go(func() { _, earlyErr = p.pull(early, &runtimeapi.ImageSpec{Image: "img"}, nil, nil) })
		wg.Go(func() { lateRef, lateErr = p.pull(t.Context(), &runtimeapi.ImageSpec{Image: "img"}, nil, nil) })
		time.Sleep(100 * time.Millisecond)
		cancelEarly()
		wg.Wait()
		if !errors.Is(earlyErr, context.Canceled) || lateErr != nil || lateRef != "sha256:img" {
			t.Fatalf("cancelled waiter: %v; other: %q %v; want Canceled and the image", earlyErr, lateRef, lateErr)
		}
		if is.cancelled != 0 || is.calls["img"] != 1 {
			t.Errorf("%d pulls cancelled, %d made; want 0 and 1", is.cancelled, is.calls["img"])
		}

		alone, cancelAlone := context.WithCancel(t.Context())
		wg.Go(func() { _, earlyErr = p.pull(alone, &runtimeapi.ImageSpec{Image: "img"}, nil, nil) })
		time.Sleep(100 * time.Millisecond)
		cancelAlone()
		wg.Wait()
		synctest.Wait()
		if !errors.Is(earlyErr, context.Canceled) || is.cancelled != 1 {
			t.Errorf("last waiter gone: %v, %d pulls cancelled; want Canceled and the pull cancelled", earlyErr, is.cancelled)
		}
		if got := pullAll(t, p, t.Context(), "img"); got[0] != "sha256:img <nil>" {
			t.Errorf("pull after a cancelled one = %q", got[0])
		}
	})
}

// TestPullerAuth: pods with other credentials never share a pull.
func TestPullerAuth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := &slowPuller{calls: map[string]int{}}
		p := newPuller(is, 2)
		var wg sync.WaitGroup
		for _, auth := range []*runtimeapi.AuthConfig{nil, {Username: "a", Password: "x"}, {Username: "a", Password: "y"}, {Username: "a", Password: "y"}} {
			wg.Go(func() { _, _ = p.pull(t.Context(), &runtimeapi.ImageSpec{Image: "private"}, auth, nil) })
		}
		wg.Wait()
		if is.calls["private"] != 3 {
			t.Errorf("%d pulls for three sets of credentials, want 3", is.calls["private"])
		}
	})
}
