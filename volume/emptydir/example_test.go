package emptydir_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/volume/emptydir"
)

func ExampleNew() {
	p := emptydir.New(emptydir.Options{})
	limit := resource.MustParse("64Mi")
	vol := &v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}},
	}}}}
	fmt.Println(p.Name(), p.CanSupport(vol), emptydir.MemorySize(pod, vol)>>20, "MiB")
	// Output: kubernetes.io/empty-dir true 64 MiB
}
