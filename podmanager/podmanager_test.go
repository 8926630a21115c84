package podmanager

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podmodel"
)

// TestGivesBackRoom churns many pods and mirror pods held at once, then
// removes them all: the Manager gives back the room its maps grew to,
// rather than hold it for as long as the agent runs.
func TestGivesBackRoom(t *testing.T) {
	m := New()
	churn := func(n int) {
		t.Helper()
		pods := make([]*v1.Pod, n)
		mirrors := make([]*v1.Pod, n)
		for i := range pods {
			meta := metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i))}
			pods[i] = &v1.Pod{ObjectMeta: meta}
			meta.UID += "-mirror"
			meta.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "hash"}
			mirrors[i] = &v1.Pod{ObjectMeta: meta}
			if !podmodel.IsMirror(mirrors[i]) {
				t.Fatal("the mirror pod is not taken for one")
			}
		}
		m.SplitMirrors(mirrors, false)
		for _, p := range pods {
			m.AddOrUpdate(p)
		}
		m.SplitMirrors(mirrors, true)
		for _, p := range pods {
			m.Remove(p)
		}
	}
	churn(10) // what the first pods make once
	before := leakcheck.LiveHeap()
	const pods = 10000
	churn(pods)
	if n := len(m.Pods()); n != 0 {
		t.Fatalf("%d pods held after the churn, want none", n)
	}
	// Some 40 bytes a pod in each of the three maps: over 1 MiB kept.
	if after := leakcheck.LiveHeap(); after > before+128<<10 {
		t.Errorf("live heap %d KiB after %d pods came and went, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
	runtime.KeepAlive(m) // live while the heap is measured
}
