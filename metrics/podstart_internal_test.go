package metrics

import (
	"fmt"
	"testing"

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
