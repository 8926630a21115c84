package status

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/status/statustest"
)

// TestHoldWritesOnceOnRelease: the statuses set while a pod is held (a
// sync that takes longer than the write delay: Pending as it begins,
// Running once it started the containers) go out as one PATCH, the last,
// when the hold is released.
func TestHoldWritesOnceOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		pod := f.Pod("default", "web")

		release := m.Hold(pod.UID)
		m.SetPodStatus(pod, podStatus(v1.PodPending, "waiting", false))
		time.Sleep(500 * time.Millisecond) // the sync starts the containers
		synctest.Wait()
		if n := len(f.PodActions("patch")); n != 0 {
			t.Errorf("%d PATCHes while held, want 0", n)
		}
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		release()
		release() // a second call does nothing
		settle()
		if n := len(f.PodActions("patch")); n != 1 {
			t.Errorf("%d PATCHes for a pod start, want 1", n)
		}
		if got := storedStatus(t, f, "web"); got.Phase != v1.PodRunning {
			t.Errorf("stored phase %s, want Running", got.Phase)
		}

		// A pod not held is written after the write delay, as before.
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", false))
		settle()
		if n := len(f.PodActions("patch")); n != 2 {
			t.Errorf("%d PATCHes after a change of a pod not held, want 2", n)
		}
	})
}

// TestHoldIsBounded: a pod held longer than MaxHold has its status
// written then, and what changes after is written when the hold ends.
func TestHoldIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		pod := f.Pod("default", "web")

		release := m.Hold(pod.UID)
		inner := m.Hold(pod.UID) // holds nest
		m.SetPodStatus(pod, podStatus(v1.PodPending, "waiting", false))
		inner()
		time.Sleep(DefaultMaxHold - time.Millisecond)
		synctest.Wait()
		if n := len(f.PodActions("patch")); n != 0 {
			t.Errorf("%d PATCHes before MaxHold, want 0", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := len(f.PodActions("patch")); n != 1 {
			t.Fatalf("%d PATCHes after MaxHold, want 1", n)
		}
		if got := storedStatus(t, f, "web"); got.Phase != v1.PodPending {
			t.Errorf("stored phase %s, want Pending", got.Phase)
		}
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()
		if n := len(f.PodActions("patch")); n != 2 {
			t.Errorf("%d PATCHes after a change past MaxHold, want 2", n)
		}
		release()
		settle()
		if n := len(f.PodActions("patch")); n != 2 {
			t.Errorf("%d PATCHes after the release with nothing new, want 2", n)
		}
	})
}

// TestHoldsGiveBackRoom holds many pods at once (every sync in flight
// holds its pod), then releases them all: the Manager gives back the room
// its map of holds grew to, rather than hold it for as long as the agent
// runs.
func TestHoldsGiveBackRoom(t *testing.T) {
	m := NewManager(Options{})
	churn := func(n int) {
		releases := make([]func(), n)
		for i := range releases {
			releases[i] = m.Hold(types.UID(fmt.Sprintf("uid-%d", i)))
		}
		for _, release := range releases {
			release()
		}
	}
	churn(10) // what the first holds make once
	before := leakcheck.LiveHeap()
	const pods = 10000
	churn(pods)
	// Some 40 bytes a pod in the map: over 300 KiB kept.
	if after := leakcheck.LiveHeap(); after > before+64<<10 {
		t.Errorf("live heap %d KiB after %d pods were held and released, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
	runtime.KeepAlive(m) // live while the heap is measured
}
