package mirror

import (
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/status/statustest"
)

// lines is a logger that keeps every line.
type lines struct {
	mu sync.Mutex
	ln []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ln = append(l.ln, prefix+" "+args)
	}, funcr.Options{Verbosity: 0})
}

// take returns the lines so far and forgets them.
func (l *lines) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ln
	l.ln = nil
	return out
}

// down makes every request to f fail as to an API server that is down
// while it is set, and counts the requests.
type down struct {
	on       atomic.Bool
	requests atomic.Int64
}

func (d *down) install(f *statustest.FakeAPI) {
	f.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		d.requests.Add(1)
		if d.on.Load() {
			return true, nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
		}
		return false, nil, nil
	})
}

// While the API server is away, Sync backs off (2s doubling to 8s) and
// returns nil, logging one error when it goes away and one line when it is
// back, instead of an error (and a list) at every housekeeping pass; it
// reports Waiting meanwhile, and reconciles at once when a retry finds the
// API server back.
func TestSyncBacksOffWhileTheAPIServerIsAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := static("web-node-a", "h1")
		f := statustest.NewFakeAPI(node(testNode))
		var d down
		d.install(f)
		var log lines
		m, err := New(clientset.From(f), Options{NodeName: testNode, Logger: log.logger()})
		if err != nil {
			t.Fatal(err)
		}
		d.on.Store(true)
		start := time.Now()
		var attempts []time.Duration
		for range 60 { // two minutes of passes, 2s apart
			before := d.requests.Load()
			if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
				t.Fatalf("Sync while the API server is away = %v, want nil", err)
			}
			if d.requests.Load() > before {
				attempts = append(attempts, time.Since(start))
			}
			if !m.Waiting() {
				t.Fatal("Waiting() = false while the API server is away")
			}
			time.Sleep(2 * time.Second)
		}
		var want []time.Duration
		for at := 14 * time.Second; at < 2*time.Minute; at += 8 * time.Second {
			want = append(want, at)
		}
		want = append([]time.Duration{0, 2 * time.Second, 6 * time.Second}, want...)
		if len(attempts) != len(want) {
			t.Errorf("attempts at %v, want at %v", attempts, want)
		}
		got := log.take()
		if len(got) != 1 || !strings.Contains(got[0], "API server unreachable") || !strings.Contains(got[0], "connection refused") {
			t.Errorf("log while away:\n%s\nwant one error line", strings.Join(got, "\n"))
		}

		d.on.Store(false)
		for range 5 { // the retry is due within 8s
			if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
		}
		if mp := f.Pod("kube-system", s.Name); mp == nil {
			t.Error("mirror pod not created once the API server is back")
		}
		if m.Waiting() {
			t.Error("Waiting() = true once the API server is back")
		}
		got = log.take()
		if len(got) != 1 || !strings.Contains(got[0], "API server reachable again") {
			t.Errorf("log once back:\n%s\nwant one line", strings.Join(got, "\n"))
		}
	})
}

// An error that the API server replied with is returned as before, at
// every Sync: only an API server that cannot be reached is waited for.
func TestSyncReturnsRefusals(t *testing.T) {
	s := static("web-node-a", "h1")
	f := statustest.NewFakeAPI(node(testNode))
	f.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, s.Name, errors.New("no"))
	})
	m := newManager(t, f, Options{})
	for range 3 {
		if err := m.Sync(t.Context(), []*v1.Pod{s}); !apierrors.IsForbidden(err) {
			t.Fatalf("Sync() = %v, want Forbidden", err)
		}
		if m.Waiting() {
			t.Error("Waiting() after a refusal")
		}
	}
}

// Without static pods, Sync does not list the node's pods to look for
// orphans while the pod cache has not completed its first list: it waits
// for the cache (Waiting), and reads it once it is synced.
func TestSyncWaitsForTheCacheWithoutStaticPods(t *testing.T) {
	f := statustest.NewFakeAPI(node(testNode))
	var d down
	d.install(f)
	d.on.Store(true)
	c := &laggingCache{}
	m := newManager(t, f, Options{Pods: c.Pods})
	for range 5 {
		if err := m.Sync(t.Context(), nil); err != nil {
			t.Fatalf("Sync() = %v, want nil", err)
		}
	}
	if n := d.requests.Load(); n != 0 {
		t.Errorf("%d requests with no static pods and the cache not synced, want 0", n)
	}
	if !m.Waiting() {
		t.Error("Waiting() = false before the cache synced")
	}
	d.on.Store(false)
	c.catchUp(t, f)
	if err := m.Sync(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if m.Waiting() {
		t.Error("Waiting() = true once the cache synced")
	}
	if n := d.requests.Load(); n != 0 {
		t.Errorf("%d requests, want 0: the cache is read", n)
	}
}
