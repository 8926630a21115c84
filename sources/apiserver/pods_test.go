package apiserver_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Pods is not synced before Run and while the first list is in flight,
// then follows the watch at once (not the coalesced snapshots), shares the
// source's objects instead of copying them, and is not synced after Run
// returned.
func TestPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(pod("b", "two"), pod("a", "one"))
		release := make(chan struct{})
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			<-release // hold the first list in flight
			return false, nil, nil
		})
		src := newSource(t, client)
		if pods, synced := src.Pods(); synced || pods != nil {
			t.Errorf("Pods() before Run = %v, %v; want nil, false", names(pods), synced)
		}

		snaps, stop := start(t, src)
		synctest.Wait()
		if pods, synced := src.Pods(); synced || pods != nil {
			t.Errorf("Pods() during the first list = %v, %v; want nil, false", names(pods), synced)
		}

		close(release)
		synctest.Wait()
		got, synced := src.Pods()
		if diff := cmp.Diff([]string{"a/one", "b/two"}, names(got)); diff != "" || !synced {
			t.Fatalf("Pods() after the first list: synced %v, pods (-want +got):\n%s", synced, diff)
		}
		_, snap := last(snaps)
		again, _ := src.Pods()
		for i := range got {
			if got[i] != snap[i] || got[i] != again[i] {
				t.Errorf("Pods()[%d] is a copy; want the object the snapshot holds", i)
			}
		}

		// Right after the first snapshot the source waits MinInterval
		// before sending another; Pods shows the changes meanwhile.
		ctx := t.Context()
		if _, err := client.CoreV1().Pods("a").Create(ctx, pod("a", "three"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Pods("b").Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n, _ := last(snaps); n != 0 {
			t.Fatalf("%d snapshots within MinInterval of the first, want 0", n)
		}
		got, synced = src.Pods()
		if diff := cmp.Diff([]string{"a/one", "a/three"}, names(got)); diff != "" || !synced {
			t.Errorf("Pods() after a create and a delete: synced %v, pods (-want +got):\n%s", synced, diff)
		}

		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		if pods, synced := src.Pods(); synced || pods != nil {
			t.Errorf("Pods() after Run returned = %v, %v; want nil, false", names(pods), synced)
		}

		// Run again: synced once its own list completed.
		_, stop = start(t, src)
		synctest.Wait()
		got, synced = src.Pods()
		if diff := cmp.Diff([]string{"a/one", "a/three"}, names(got)); diff != "" || !synced {
			t.Errorf("Pods() in a second Run: synced %v, pods (-want +got):\n%s", synced, diff)
		}
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// Pods may be called from any goroutine while Run starts, follows the
// watch and stops (the race detector checks).
func TestPodsConcurrently(t *testing.T) {
	client := fake.NewClientset(pod("a", "one"))
	src := newSource(t, client)
	ctx, cancel := context.WithCancel(t.Context())
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for ctx.Err() == nil {
				pods, _ := src.Pods()
				for _, p := range pods {
					_ = p.Namespace + p.Name + string(p.UID)
				}
				runtime.Gosched()
			}
		})
	}
	defer func() { cancel(); readers.Wait() }()

	snaps, stop := start(t, src)
	<-snaps
	const created = 20
	for i := range created {
		if _, err := client.CoreV1().Pods("b").Create(ctx, pod("b", string(rune('a'+i))), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pods, synced := src.Pods()
		if synced && len(pods) == 1+created {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pods() = %d pods, synced %v; want %d, true", len(pods), synced, 1+created)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}
