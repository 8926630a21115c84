package mirror

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/status/statustest"
)

// laggingCache is an Options.Pods whose watch delivers the fake API
// server's pods only when the test calls catchUp.
type laggingCache struct {
	mu     sync.Mutex
	pods   []*v1.Pod
	synced bool
}

func (c *laggingCache) Pods() ([]*v1.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods, c.synced
}

// catchUp makes the cache hold what f holds now, and synced.
func (c *laggingCache) catchUp(t *testing.T, f *statustest.FakeAPI) {
	t.Helper()
	pods, err := storedPods(f)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods, c.synced = pods, true
}

// syncN calls Sync n times with staticPods and fails the test on an error.
func syncN(t *testing.T, m *Manager, n int, staticPods ...*v1.Pod) {
	t.Helper()
	for range n {
		if err := m.Sync(t.Context(), staticPods); err != nil {
			t.Fatalf("Sync() = %v, want nil", err)
		}
	}
}

// checkStats fails the test unless the manager sent the requests of want.
func checkStats(t *testing.T, m *Manager, want Stats, when string) {
	t.Helper()
	if diff := cmp.Diff(want, m.Stats()); diff != "" {
		t.Errorf("requests %s (-want +got):\n%s", when, diff)
	}
}

// With a cache that keeps up, Sync never lists: it creates the missing
// mirror pod once, deletes the orphan once, and then sends no request at
// all however often it runs.
func TestSyncWithCacheSendsNoList(t *testing.T) {
	kept, missing, gone := static("kept-node-a", "h1"), static("missing-node-a", "h2"), static("gone-node-a", "h3")
	f := statustest.NewFakeAPI(node(testNode), mirrorPod(kept, "h1"), mirrorPod(gone, "h3"), apiPod("default", "web", testNode))
	c := &laggingCache{}
	c.catchUp(t, f)
	var created []string
	m := newManager(t, f, Options{Pods: c.Pods, OnCreate: func(s, _ *v1.Pod) { created = append(created, s.Name) }})

	syncN(t, m, 1, kept, missing)
	checkStats(t, m, Stats{Gets: 1, Creates: 1, Deletes: 1}, "by the first Sync")
	requests := len(f.Actions())
	for range 50 {
		c.catchUp(t, f) // the watch delivers
		syncN(t, m, 1, kept, missing)
	}
	checkStats(t, m, Stats{Gets: 1, Creates: 1, Deletes: 1}, "after 51 Syncs")
	if n := len(f.Actions()) - requests; n != 0 {
		t.Errorf("%d requests after the first Sync, want 0: %v", n, f.Actions()[requests:])
	}
	if n := len(f.PodActions("list")); n != 0 {
		t.Errorf("%d lists of pods, want 0", n)
	}

	if mp := f.Pod("kube-system", missing.Name); mp == nil || !podmodel.IsMirrorOf(mp, missing) {
		t.Errorf("mirror pod of %s = %+v, want one", missing.Name, mp)
	} else if got, ok := m.MirrorPod(missing); !ok || got.UID != mp.UID {
		t.Errorf("MirrorPod(%s) = %v, %v; want the created pod", missing.Name, got, ok)
	}
	if f.Pod("kube-system", gone.Name) != nil {
		t.Errorf("orphaned mirror pod %s still there", gone.Name)
	}
	if diff := cmp.Diff([]string{missing.Name}, created); diff != "" {
		t.Errorf("OnCreate calls (-want +got):\n%s", diff)
	}
}

// TestSyncWithStaleCache covers caches that have not delivered what the
// API server holds: Sync neither repeats its own writes nor fails, listing
// while the cache lags behind what it wrote or listed, and goes back to
// the cache once the cache caught up.
func TestSyncWithStaleCache(t *testing.T) {
	t.Run("own writes not delivered yet", func(t *testing.T) {
		replaced, missing, gone := static("replaced-node-a", "h1"), static("missing-node-a", "h2"), static("gone-node-a", "h3")
		f := statustest.NewFakeAPI(node(testNode), mirrorPod(replaced, "h0"), mirrorPod(gone, "h3"))
		c := &laggingCache{}
		c.catchUp(t, f)
		m := newManager(t, f, Options{Pods: c.Pods})

		syncN(t, m, 1, replaced, missing)
		// The stale mirror pod and the orphan deleted, two created.
		checkStats(t, m, Stats{Gets: 1, Creates: 2, Deletes: 2}, "by the first Sync")
		current := map[*v1.Pod]*v1.Pod{replaced: f.Pod("kube-system", replaced.Name), missing: f.Pod("kube-system", missing.Name)}

		// The cache still shows the deleted pods and not the created ones.
		for i := range 3 {
			syncN(t, m, 1, replaced, missing)
			checkStats(t, m, Stats{Lists: uint64(i + 1), Gets: 1, Creates: 2, Deletes: 2}, "while the cache lags")
			for s, want := range current {
				if got, ok := m.MirrorPod(s); !ok || want == nil || got.UID != want.UID {
					t.Errorf("MirrorPod(%s) = %v, %v; want the created pod", s.Name, got, ok)
				}
			}
		}

		c.catchUp(t, f)
		syncN(t, m, 5, replaced, missing)
		checkStats(t, m, Stats{Lists: 3, Gets: 1, Creates: 2, Deletes: 2}, "after the cache caught up")
		if f.Pod("kube-system", gone.Name) != nil {
			t.Errorf("orphaned mirror pod %s still there", gone.Name)
		}
		for s, want := range current {
			if got := f.Pod("kube-system", s.Name); got == nil || got.UID != want.UID || !podmodel.IsMirrorOf(got, s) {
				t.Errorf("mirror pod of %s = %+v, want the one created first", s.Name, got)
			}
		}
	})

	t.Run("created and deleted before the cache showed it", func(t *testing.T) {
		s := static("etcd-node-a", "h1")
		f := statustest.NewFakeAPI(node(testNode))
		c := &laggingCache{}
		c.catchUp(t, f)
		m := newManager(t, f, Options{Pods: c.Pods})
		syncN(t, m, 1, s)
		first := f.Pod("kube-system", s.Name)
		// A user deletes the mirror pod; the cache, which never showed
		// it, delivers the deletion.
		if err := f.CoreV1().Pods("kube-system").Delete(t.Context(), s.Name, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		c.catchUp(t, f)

		syncN(t, m, 1, s)
		checkStats(t, m, Stats{Lists: 1, Gets: 2, Creates: 2}, "after the deletion")
		second := f.Pod("kube-system", s.Name)
		if second == nil || second.UID == first.UID || !podmodel.IsMirrorOf(second, s) {
			t.Fatalf("mirror pod = %+v, want a new one", second)
		}
		syncN(t, m, 1, s) // the cache does not show the second yet
		c.catchUp(t, f)
		syncN(t, m, 3, s)
		checkStats(t, m, Stats{Lists: 2, Gets: 2, Creates: 2}, "after the cache caught up")
		if got, ok := m.MirrorPod(s); !ok || got.UID != second.UID {
			t.Errorf("MirrorPod() = %v, %v; want the second mirror pod", got, ok)
		}
	})

	t.Run("created mirror pod replaced by a pod that is not a mirror", func(t *testing.T) {
		s := static("web", "h1")
		s.Namespace = "default"
		f := statustest.NewFakeAPI(node(testNode))
		c := &laggingCache{}
		c.catchUp(t, f)
		m := newManager(t, f, Options{Pods: c.Pods})
		syncN(t, m, 1, s)
		if err := f.CoreV1().Pods("default").Delete(t.Context(), s.Name, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.CoreV1().Pods("default").Create(t.Context(), apiPod("default", "web", testNode), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.catchUp(t, f)

		// One list tells the created mirror pod is gone; then the
		// cache, which agrees, serves.
		syncN(t, m, 5, s)
		checkStats(t, m, Stats{Lists: 1, Gets: 1, Creates: 1}, "after the replacement")
		if got := f.Pod("default", "web"); got == nil || podmodel.IsMirror(got) {
			t.Errorf("pod default/web = %+v, want the regular pod untouched", got)
		}
	})

	t.Run("mirror pod the cache does not show yet", func(t *testing.T) {
		s := static("etcd-node-a", "h1")
		f := statustest.NewFakeAPI(node(testNode))
		c := &laggingCache{}
		c.catchUp(t, f)
		existing, err := f.CoreV1().Pods("kube-system").Create(t.Context(), mirrorPod(s, "h1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		called := false
		m := newManager(t, f, Options{Pods: c.Pods, OnCreate: func(_, _ *v1.Pod) { called = true }})

		// The create meets AlreadyExists and reads the pod instead.
		syncN(t, m, 1, s)
		checkStats(t, m, Stats{Gets: 2, Creates: 1}, "by the first Sync")
		if got, ok := m.MirrorPod(s); !ok || got.UID != existing.UID {
			t.Errorf("MirrorPod() = %v, %v; want the existing mirror pod", got, ok)
		}
		if called {
			t.Error("OnCreate called for a mirror pod the manager did not create")
		}
		syncN(t, m, 1, s) // lists: the cache lags behind the pod read
		c.catchUp(t, f)
		syncN(t, m, 3, s)
		checkStats(t, m, Stats{Lists: 1, Gets: 2, Creates: 1}, "after the cache caught up")
	})

	t.Run("orphan already deleted", func(t *testing.T) {
		kept, gone := static("kept-node-a", "h1"), static("gone-node-a", "h3")
		f := statustest.NewFakeAPI(node(testNode), mirrorPod(kept, "h1"), mirrorPod(gone, "h3"))
		c := &laggingCache{}
		c.catchUp(t, f)
		// Deleted behind the cache's back: the DELETE meets NotFound.
		if err := f.CoreV1().Pods("kube-system").Delete(t.Context(), gone.Name, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		m := newManager(t, f, Options{Pods: c.Pods})

		syncN(t, m, 1, kept)
		checkStats(t, m, Stats{Deletes: 1}, "by the first Sync")
		syncN(t, m, 1, kept) // lists: the cache still shows the orphan
		c.catchUp(t, f)
		syncN(t, m, 3, kept)
		checkStats(t, m, Stats{Lists: 1, Deletes: 1}, "after the cache caught up")
		if got, ok := m.MirrorPod(kept); !ok || got.UID != f.Pod("kube-system", kept.Name).UID {
			t.Errorf("MirrorPod(%s) = %v, %v; want the kept pod", kept.Name, got, ok)
		}
	})

	t.Run("not synced", func(t *testing.T) {
		s := static("etcd-node-a", "h1")
		f := statustest.NewFakeAPI(node(testNode))
		c := &laggingCache{}
		m := newManager(t, f, Options{Pods: c.Pods})
		syncN(t, m, 2, s)
		checkStats(t, m, Stats{Lists: 2, Gets: 1, Creates: 1}, "while the cache is not synced")
		c.catchUp(t, f)
		syncN(t, m, 3, s)
		checkStats(t, m, Stats{Lists: 2, Gets: 1, Creates: 1}, "after the cache synced")
	})
}

// The manager follows the watch of the API source it is given: with
// Options.Pods set to apiserver.Source.Pods, the only list of pods is the
// source's own.
func TestSyncFollowsTheAPISource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kept, missing, gone := static("kept-node-a", "h1"), static("missing-node-a", "h2"), static("gone-node-a", "h3")
		f := statustest.NewFakeAPI(node(testNode), mirrorPod(kept, "h1"), mirrorPod(gone, "h3"), apiPod("default", "web", testNode))
		src, err := apiserver.New(clientset.From(f), testNode, apiserver.Options{Logger: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			snapshots := make(chan []*v1.Pod)
			go func() {
				for range snapshots {
				}
			}()
			done <- src.Run(ctx, snapshots)
			close(snapshots)
		}()
		synctest.Wait()

		m := newManager(t, f, Options{Pods: src.Pods})
		for range 30 { // a minute of housekeeping
			syncN(t, m, 1, kept, missing)
			time.Sleep(2 * time.Second)
			synctest.Wait()
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}

		checkStats(t, m, Stats{Gets: 1, Creates: 1, Deletes: 1}, "in a minute")
		if n := len(f.PodActions("list")); n != 1 {
			t.Errorf("%d lists of pods, want 1 (the source's)", n)
		}
		if mp := f.Pod("kube-system", missing.Name); mp == nil || !podmodel.IsMirrorOf(mp, missing) {
			t.Errorf("mirror pod of %s = %+v, want one", missing.Name, mp)
		}
		if f.Pod("kube-system", gone.Name) != nil {
			t.Errorf("orphaned mirror pod %s still there", gone.Name)
		}
	})
}
