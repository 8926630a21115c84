package podsync

import (
	"testing"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
	"github.com/nodekit/nodekit/status"
)

// TestStatusPodCgroup: a Running pod's status reads its cgroup's cpu and
// memory the kubelet's way (cgroup v2 weight 20 as 500 shares), a pod
// with pod-level resources also gets the resize comparison (the weight as
// 501 shares, which give it back, against the allocated configuration),
// and a pod neither Running nor with pod-level resources reads nothing.
func TestStatusPodCgroup(t *testing.T) {
	pm, err := cgroup.NewPodManager(cgroup.PodManagerOptions{CgroupfsRoot: cgrouptest.V2(t), Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := pm.EnsureNode(); err != nil {
		t.Fatal(err)
	}
	rl := func(cpu, mem string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	}
	pod := func(uid string, phase v1.PodPhase, podLevel *v1.ResourceRequirements) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: k8stypes.UID("uid-" + uid)},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("500m", "64Mi"), Limits: rl("500m", "64Mi")}}},
				Resources:  podLevel,
			},
			Status: v1.PodStatus{Phase: phase},
		}
	}
	running := pod("running", v1.PodRunning, nil)
	podLevel := pod("podlevel", v1.PodRunning, &v1.ResourceRequirements{Requests: rl("500m", "64Mi"), Limits: rl("500m", "64Mi")})
	pending := pod("pending", v1.PodPending, nil)
	for _, p := range []*v1.Pod{running, podLevel, pending} {
		if _, err := pm.EnsurePod(p); err != nil {
			t.Fatalf("EnsurePod(%s): %v", p.Name, err)
		}
	}

	if st := statusPodCgroup(pm, pending); st != nil {
		t.Errorf("pending pod without pod-level resources: %+v, want nil", st)
	}
	st := statusPodCgroup(pm, running)
	if st == nil || st.CPU == nil || st.Memory == nil {
		t.Fatalf("running pod: %+v, want its cpu and memory read", st)
	}
	if *st.CPU.CPUShares != 500 || *st.CPU.CPUQuota != 50000 || *st.Memory.Memory != 64<<20 {
		t.Errorf("running pod: shares %d, quota %d, memory %d; want 500, 50000, %d", *st.CPU.CPUShares, *st.CPU.CPUQuota, *st.Memory.Memory, 64<<20)
	}
	if st.Current.CPUShares != nil || st.Desired.CPUShares != nil {
		t.Errorf("running pod without pod-level resources: resize comparison %+v", st)
	}
	st = statusPodCgroup(pm, podLevel)
	if st == nil || st.CPU == nil || st.Current.CPUShares == nil || st.Desired.CPUShares == nil {
		t.Fatalf("pod-level pod: %+v, want the read and the resize comparison", st)
	}
	if *st.CPU.CPUShares != 500 || *st.Current.CPUShares != 501 {
		t.Errorf("pod-level pod: status shares %d, resize shares %d; want 500, 501", *st.CPU.CPUShares, *st.Current.CPUShares)
	}
	if status.PodResizeInProgress(podLevel, nil, st) {
		t.Error("pod-level pod with its allocated cgroup: resize in progress")
	}
}
