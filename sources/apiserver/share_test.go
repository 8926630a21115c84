package apiserver_test

import (
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A new version of a pod that changes only its status shares the spec and
// the metadata's maps of the version before it, so that the versions the
// agent's parts hold cost the pod one spec; a version whose spec or labels
// changed has its own. Whether the source watches on its own or through a
// SharedPods.
func TestVersionsShareUnchangedParts(t *testing.T) {
	for _, mode := range []string{"own", "shared"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := pod("a", "one")
				p.Labels = map[string]string{"app": "web"}
				p.Annotations = map[string]string{"note": "x"}
				p.Finalizers = []string{"f"}
				client := fake.NewClientset(p)
				src, snaps, stop := startMode(t, client, mode)
				defer stop()
				held := func() *v1.Pod {
					t.Helper()
					time.Sleep(time.Second)
					synctest.Wait()
					last(snaps)
					pods, _ := src.Pods()
					if len(pods) != 1 {
						t.Fatalf("%d pods held, want 1", len(pods))
					}
					return pods[0]
				}
				first := held()
				ctx := t.Context()

				// A status write: a new version, the same spec and metadata.
				st := first.DeepCopy()
				st.Status.Phase = v1.PodRunning
				if _, err := client.CoreV1().Pods("a").UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				second := held()
				if second == first || second.Status.Phase != v1.PodRunning || first.Status.Phase == v1.PodRunning {
					t.Fatalf("second version %p phase %q, first %p phase %q; want a new Running version, the first untouched",
						second, second.Status.Phase, first, first.Status.Phase)
				}
				if &second.Spec.Containers[0] != &first.Spec.Containers[0] {
					t.Error("the second version has a spec of its own, want the first's shared")
				}
				for what, same := range map[string]bool{
					"labels":      sameMap(second.Labels, first.Labels),
					"annotations": sameMap(second.Annotations, first.Annotations),
					"finalizers":  &second.Finalizers[0] == &first.Finalizers[0],
				} {
					if !same {
						t.Errorf("the second version has %s of its own, want the first's shared", what)
					}
				}

				// A change of the spec and of the labels: their own.
				up := second.DeepCopy()
				up.Spec.Containers[0].Image = "busybox:2"
				up.Labels = map[string]string{"app": "db"}
				if _, err := client.CoreV1().Pods("a").Update(ctx, up, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				third := held()
				if third.Spec.Containers[0].Image != "busybox:2" || third.Labels["app"] != "db" {
					t.Fatalf("third version: image %q, labels %v; want busybox:2, app=db", third.Spec.Containers[0].Image, third.Labels)
				}
				if second.Spec.Containers[0].Image != "busybox" || second.Labels["app"] != "web" {
					t.Errorf("second version changed: image %q, labels %v", second.Spec.Containers[0].Image, second.Labels)
				}
				if !sameMap(third.Annotations, first.Annotations) {
					t.Error("the third version has annotations of its own, want the first's shared")
				}
			})
		})
	}
}

// sameMap reports whether a and b are the same non-nil map object.
func sameMap(a, b map[string]string) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
