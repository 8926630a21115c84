package metrics

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodStartForget checks that the pod start metrics keep nothing of a
// pod that became terminal or was forgotten (deleted before it became
// terminal, as a pod replaced while it runs): under churn those entries
// would otherwise grow for as long as the agent runs.
func TestPodStartForget(t *testing.T) {
	k, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint(i))},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
		k.ObservePodStatus(pod, v1.PodStatus{Phase: v1.PodPending})
		k.ObservePodStatus(pod, v1.PodStatus{Phase: v1.PodRunning})
		if i%2 == 0 {
			k.ObservePodStatus(pod, v1.PodStatus{Phase: v1.PodSucceeded})
		}
	}
	if n := len(k.starts.pods); n != 50 {
		t.Fatalf("%d pods tracked, want the 50 not terminal", n)
	}
	for i := range 100 {
		k.ForgetPod(types.UID(fmt.Sprint(i)))
	}
	if n := len(k.starts.pods); n != 0 {
		t.Errorf("%d pods tracked after ForgetPod, want 0", n)
	}
}

// TestPodStartGivesBackRoom tracks many pods at once, then forgets them
// all: the pod start metrics give back the room their map grew to, rather
// than hold it for as long as the agent runs.
func TestPodStartGivesBackRoom(t *testing.T) {
	k, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	churn := func(pods int) {
		for i := range pods {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint(i))}}
			k.ObservePodStatus(pod, v1.PodStatus{Phase: v1.PodPending})
		}
		for i := range pods {
			k.ForgetPod(types.UID(fmt.Sprint(i)))
		}
	}
	churn(10) // what the first pods make once
	before := leakcheck.LiveHeap()
	const pods = 10000
	churn(pods)
	// Some 40 bytes a pod in the map: over 300 KiB kept.
	if after := leakcheck.LiveHeap(); after > before+64<<10 {
		t.Errorf("live heap %d KiB after %d pods came and went, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
	runtime.KeepAlive(k) // live while the heap is measured
}
