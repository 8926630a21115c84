package nodekit

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podmodel"
)

func apiPodWithCPU(uid, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), Generation: 2,
			Annotations: map[string]string{podmodel.AnnotationSource: podmodel.APIServerSource}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
	}
}

func cpuOf(p *v1.Pod) string {
	q := p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]
	return q.String()
}

// TestResizesCheckpoint: an admitted pod is allocated what it was admitted
// with; a resize that fits is allocated, one that does not stays pending
// with the pod run as allocated; a restarted agent (a new allocation
// manager on the same checkpoint) admits and runs the pod with what it
// allocated, not what the spec asks for now.
func TestResizesCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), allocationCheckpointFile)
	var (
		mu     sync.Mutex
		active []*v1.Pod
	)
	newResizes := func() *resizes {
		return &resizes{
			path:  path,
			log:   testr.New(t),
			known: func(types.UID) bool { return true },
			active: func() []*v1.Pod {
				mu.Lock()
				defer mu.Unlock()
				return active
			},
			allocatable: func() v1.ResourceList {
				return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
			},
		}
	}
	r := newResizes()
	var admitted []string
	record := admission.Func(func(pod *v1.Pod, _ []*v1.Pod) admission.Result {
		admitted = append(admitted, cpuOf(pod))
		return admission.Result{Admit: true}
	})
	admit := r.admit([]admission.Handler{record})
	pod := apiPodWithCPU("a", "1")
	if res := admit.Admit(pod, nil); !res.Admit {
		t.Fatalf("admission: %+v", res)
	}
	other := apiPodWithCPU("b", "2")
	mu.Lock()
	active = []*v1.Pod{pod, other}
	mu.Unlock()

	if got := r.resolve(apiPodWithCPU("a", "1500m")); cpuOf(got) != "1500m" || r.PendingResize("a") != nil {
		t.Errorf("a resize that fits: runs with %s, pending %v", cpuOf(got), r.PendingResize("a"))
	}
	got := r.resolve(apiPodWithCPU("a", "3"))
	if cpuOf(got) != "1500m" {
		t.Errorf("a deferred resize runs the pod with %s, want the allocated 1500m", cpuOf(got))
	}
	c := r.PendingResize("a")
	if c == nil || c.Reason != v1.PodReasonDeferred || c.Message != "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000" || c.ObservedGeneration != 2 {
		t.Errorf("PodResizePending = %+v", c)
	}

	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	restarted := newResizes()
	admitted = nil
	if res := restarted.admit([]admission.Handler{record}).Admit(apiPodWithCPU("a", "3"), nil); !res.Admit || len(admitted) != 1 || admitted[0] != "1500m" {
		t.Errorf("after a restart the pod was admitted with %v, want the allocated 1500m", admitted)
	}
	if got, _ := restarted.allocated(apiPodWithCPU("a", "3")); cpuOf(got) != "1500m" {
		t.Errorf("after a restart the pod runs with %s, want 1500m", cpuOf(got))
	}

	// An unreadable checkpoint is logged and replaced, the pods allocated
	// as asked.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := newResizes()
	if got := broken.resolve(apiPodWithCPU("a", "3")); cpuOf(got) != "3" {
		t.Errorf("with a broken checkpoint the pod runs with %s, want its spec's 3", cpuOf(got))
	}
}
