package cgroup_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
	"github.com/nodekit/nodekit/podmodel"
)

// A PodManager on a directory laid out as cgroup v1 (on a real node, leave
// CgroupfsRoot empty for /sys/fs/cgroup).
func ExampleNewPodManager() {
	dir, _ := os.MkdirTemp("", "cgroup-example")
	defer os.RemoveAll(dir)
	_ = cgrouptest.WriteV1(dir)

	pm, err := cgroup.NewPodManager(cgroup.PodManagerOptions{CgroupfsRoot: dir})
	if err != nil {
		panic(err)
	}
	limits := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: limits, Limits: limits}}}},
	}
	parent, err := pm.EnsurePod(pod)
	if err != nil {
		panic(err)
	}
	fmt.Println("cgroup parent:", parent)
	data, _ := os.ReadFile(dir + "/memory" + parent + "/memory.limit_in_bytes")
	fmt.Println("memory.limit_in_bytes:", string(data))
	uids, _ := pm.Pods()
	fmt.Println("pod cgroups:", uids)
	_ = pm.DestroyPod(context.TODO(), pod.UID)
	uids, _ = pm.Pods()
	fmt.Println("after DestroyPod:", uids)
	// Output:
	// cgroup parent: /kubepods/pod1234
	// memory.limit_in_bytes: 67108864
	// pod cgroups: [1234]
	// after DestroyPod: []
}

func ExampleResourceConfigForPod() {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "app",
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}}}}
	rc := cgroup.ResourceConfigForPod(pod, true)
	fmt.Println(podmodel.QOSClass(pod))
	fmt.Println("cpu.shares", *rc.CPUShares, "cpu.weight", cgroup.CPUSharesToWeight(*rc.CPUShares))
	fmt.Println("cpu.cfs_quota_us", *rc.CPUQuota, "cpu.max", cgroup.FormatCPUMax(rc.CPUQuota, rc.CPUPeriod))
	fmt.Println("memory", *rc.Memory)
	// Output:
	// Burstable
	// cpu.shares 256 cpu.weight 10
	// cpu.cfs_quota_us 100000 cpu.max 100000 100000
	// memory 134217728
}

// Detect and NewManager (together: Open) on a directory laid out as
// cgroup v2.
func ExampleNewManager() {
	dir, _ := os.MkdirTemp("", "cgroup-example")
	defer os.RemoveAll(dir)
	_ = cgrouptest.WriteV2(dir)

	info, err := cgroup.Detect(dir)
	if err != nil {
		panic(err)
	}
	m, err := cgroup.NewManager(info)
	if err != nil {
		panic(err)
	}
	shares := uint64(1024)
	if err := m.Create("/demo", &cgroup.ResourceConfig{CPUShares: &shares}); err != nil {
		panic(err)
	}
	data, _ := os.ReadFile(dir + "/demo/cpu.weight")
	fmt.Println(m.Info().Mode, "cpu.weight", string(data))
	fmt.Println(m.Destroy(context.TODO(), "/demo"))
	// Output:
	// v2 cpu.weight 39
	// <nil>
}
