package apiserver_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/sources/apiserver"
)

func podOn(nodeName, ns, name string) *v1.Pod {
	p := pod(ns, name)
	p.Spec.NodeName = nodeName
	return p
}

// The sources of several nodes sharing one SharedPods see their own
// node's pods, as through watches of their own, over one list and one
// watch of every node's pods (spec.nodeName set), and watch none
// themselves. Run on goroutines of their own, and pushing their snapshots
// (Start) from tasks of a periodic.Driver, with no goroutine of their own.
func TestSharedPods(t *testing.T) {
	for _, mode := range []string{"run", "push"} {
		t.Run(mode, func(t *testing.T) { testSharedPods(t, mode) })
	}
}

// startPush starts src as a sources.Pusher whose pushes go to the
// returned channel; stop stops it.
func startPush(t *testing.T, src *apiserver.Source) (<-chan []*v1.Pod, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	snaps := make(chan []*v1.Pod, 100)
	wait, err := src.Start(ctx, func(_ context.Context, pods []*v1.Pod) { snaps <- pods })
	if err != nil {
		t.Fatal(err)
	}
	return snaps, func() error { cancel(); wait(); return nil }
}

func testSharedPods(t *testing.T, mode string) {
	synctest.Test(t, func(t *testing.T) {
		var driver *periodic.Driver
		start := start
		if mode == "push" {
			driver = periodictest.Start(t)
			start = startPush
		}
		client := fake.NewClientset(podOn("n1", "a", "one"), podOn("n2", "a", "two"), podOn("n1", "b", "three"))
		var lists, watches []string
		client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			lists = append(lists, a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
			return false, nil, nil
		})
		client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
			watches = append(watches, a.(k8stesting.WatchAction).GetWatchRestrictions().Fields.String())
			return false, nil, nil
		})
		log := testr.New(t)
		shared, err := apiserver.NewSharedPods(clientset.From(client), apiserver.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		newSrc := func(nodeName string) *apiserver.Source {
			src, err := apiserver.New(clientset.From(client), nodeName, apiserver.Options{Logger: log, Shared: shared, Periodic: driver})
			if err != nil {
				t.Fatal(err)
			}
			return src
		}
		s1, s2, s3 := newSrc("n1"), newSrc("n2"), newSrc("n3")
		snaps1, stop1 := start(t, s1)
		snaps2, stop2 := start(t, s2)
		synctest.Wait()
		if n, _ := last(snaps1); n != 0 {
			t.Errorf("%d snapshots before the shared watch listed, want 0", n)
		}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- shared.Run(ctx) }()
		synctest.Wait()
		want := []string{"spec.nodeName!="}
		if diff := cmp.Diff(want, lists); diff != "" {
			t.Errorf("lists (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, watches); diff != "" {
			t.Errorf("watches (-want +got):\n%s", diff)
		}
		_, snap := last(snaps1)
		if diff := cmp.Diff([]string{"a/one", "b/three"}, names(snap)); diff != "" {
			t.Errorf("n1's first snapshot (-want +got):\n%s", diff)
		}
		_, snap = last(snaps2)
		if diff := cmp.Diff([]string{"a/two"}, names(snap)); diff != "" {
			t.Errorf("n2's first snapshot (-want +got):\n%s", diff)
		}

		// A source started after the list: its first snapshot at once,
		// empty for a node with no pods yet.
		snaps3, stop3 := start(t, s3)
		synctest.Wait()
		if n, snap := last(snaps3); n != 1 || len(snap) != 0 {
			t.Errorf("n3: %d snapshots, last %v; want one, empty", n, names(snap))
		}

		// Changes reach the node's source only.
		if _, err := client.CoreV1().Pods("c").Create(t.Context(), podOn("n3", "c", "four"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Pods("a").Delete(t.Context(), "two", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(apiserver.DefaultMinInterval)
		synctest.Wait()
		if n, _ := last(snaps1); n != 0 {
			t.Errorf("n1: %d snapshots after other nodes' changes, want 0", n)
		}
		if _, snap := last(snaps2); snap == nil || len(snap) != 0 {
			t.Errorf("n2 after its pod's deletion: %v, want an empty snapshot", snap)
		}
		if _, snap := last(snaps3); len(snap) != 1 || snap[0].Name != "four" {
			t.Errorf("n3 after its pod's creation: %v, want c/four", names(snap))
		}
		if pods, synced := s3.Pods(); !synced || len(pods) != 1 {
			t.Errorf("n3's Pods() = %v, %v", names(pods), synced)
		}
		if n := leakcheck.Goroutines("apiserver.(*Source)"); mode == "push" && n != 0 {
			t.Errorf("%d goroutines of the pushing sources, want none", n)
		}

		for _, stop := range []func() error{stop1, stop2, stop3} {
			if err := stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		// A source run again is synced at once from the shared watch.
		snaps1, stop1 = start(t, s1)
		synctest.Wait()
		if _, snap := last(snaps1); len(snap) != 2 {
			t.Errorf("n1 run again: first snapshot %v, want its two pods", names(snap))
		}
		if err := stop1(); err != nil {
			t.Error(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("SharedPods.Run: %v", err)
		}
		if len(lists) != 1 || len(watches) != 1 {
			t.Errorf("%d lists and %d watches, want one of each", len(lists), len(watches))
		}
	})
}
