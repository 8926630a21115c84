package apiserver_test

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func withManagedFields(p *v1.Pod) *v1.Pod {
	p.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{}}}`)},
	}}
	return p
}

// The pods a source holds and sends lack their managedFields, which the
// agent never reads, whether it watches on its own or through a
// SharedPods: from the first list and from the watch's additions and
// updates.
func TestManagedFieldsDropped(t *testing.T) {
	for _, mode := range []string{"own", "shared"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := fake.NewClientset(withManagedFields(pod("a", "one")))
				src, snaps, stop := startMode(t, client, mode)
				defer stop()
				check := func(step string, want int) {
					t.Helper()
					time.Sleep(time.Second)
					synctest.Wait()
					_, snap := last(snaps)
					held, _ := src.Pods()
					if len(snap) != want || len(held) != want {
						t.Fatalf("%s: %d pods sent, %d held; want %d", step, len(snap), len(held), want)
					}
					for i := range snap {
						if snap[i].ManagedFields != nil || held[i].ManagedFields != nil {
							t.Errorf("%s: pod %s holds managedFields %v", step, snap[i].Name, snap[i].ManagedFields)
						}
					}
				}
				check("list", 1)
				ctx := t.Context()
				if _, err := client.CoreV1().Pods("a").Create(ctx, withManagedFields(pod("a", "two")), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				check("add", 2)
				p := withManagedFields(pod("a", "one"))
				p.Labels = map[string]string{"x": "y"}
				if _, err := client.CoreV1().Pods("a").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				check("update", 2)
				// The API server's object keeps them.
				got, err := client.CoreV1().Pods("a").Get(ctx, "one", metav1.GetOptions{})
				if err != nil || got.ManagedFields == nil {
					t.Errorf("the server's pod: %v, managedFields %v; want them kept", err, got.ManagedFields)
				}
			})
		})
	}
}
