package apiserver

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkShareUnchanged is the work a pod's status write adds to the
// watch: its new version compared with the stored one and made to share
// the unchanged parts.
func BenchmarkShareUnchanged(b *testing.B) {
	grace := int64(300)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "web-7d9f8c6b5d-x2x4z", UID: "0b4f4c38-1d3e-4f8a-9c53-2f0f9d0b9a11", GenerateName: "web-7d9f8c6b5d-",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5d"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5d", UID: "c1"}},
		},
		Spec: v1.PodSpec{
			NodeName: "n1",
			Containers: []v1.Container{{
				Name: "web", Image: "registry.example/web:v1",
				Resources:              v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile, ImagePullPolicy: v1.PullIfNotPresent,
			}},
			Tolerations: []v1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &grace},
				{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &grace},
			},
			RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst, SchedulerName: "default-scheduler",
			SecurityContext: &v1.PodSecurityContext{},
		},
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(pod); err != nil {
		b.Fatal(err)
	}
	versions := make([]*v1.Pod, 1000)
	for i := range versions {
		versions[i] = pod.DeepCopy() // as decoded: nothing shared
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		shareUnchanged(store, versions[i%len(versions)])
		i++
	}
}
