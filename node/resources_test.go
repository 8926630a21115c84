package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAllocatable: capacity less system-reserved, kube-reserved and the
// hard eviction thresholds, the kubelet's formula, floored at zero.
func TestAllocatable(t *testing.T) {
	f := testFacts(t, Options{
		SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
		KubeReserved:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("512Mi")},
		HardEvictionReserved: func(capacity v1.ResourceList) v1.ResourceList {
			// memory.available<100Mi, nodefs.available<10%
			es := capacity[v1.ResourceEphemeralStorage]
			return v1.ResourceList{
				v1.ResourceMemory:           resource.MustParse("100Mi"),
				v1.ResourceEphemeralStorage: *resource.NewQuantity(es.Value()/10, resource.BinarySI),
			}
		},
	})
	got := map[string]string{}
	for name, q := range f.allocatable {
		got[string(name)] = q.String()
	}
	want := map[string]string{
		"cpu":               "3250m",
		"pods":              "110",
		"ephemeral-storage": "90Gi",
		"memory":            resource.NewQuantity(8<<30-1<<30-512<<20-100<<20, resource.BinarySI).String(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocatable (-want +got):\n%s", diff)
	}
	over := Allocatable(v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}, v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")})
	if q := over[v1.ResourceMemory]; q.Sign() != 0 {
		t.Errorf("over-reserved memory %s, want 0", q.String())
	}
}

func TestPressureConditions(t *testing.T) {
	f := testFacts(t, Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(10 * time.Second)
	calm := f.statusOf(v1.NodeStatus{}, observed{}, t0)
	pressed := f.statusOf(calm, observed{pressure: []v1.NodeConditionType{v1.NodeDiskPressure}}, t1)
	i := conditionIndex(pressed.Conditions, v1.NodeDiskPressure)
	c := pressed.Conditions[i]
	if c.Status != v1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" || !c.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("DiskPressure = %+v, want True since t1", c)
	}
	if m := pressed.Conditions[conditionIndex(pressed.Conditions, v1.NodeMemoryPressure)]; m.Status != v1.ConditionFalse || !m.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("MemoryPressure = %+v, want False since t0", m)
	}
	if !statusChanged(calm, pressed) {
		t.Error("a pressure change is not a status change")
	}
	if diff := cmp.Diff([]string{EventNodeHasDiskPressure}, conditionEvents(calm.Conditions, pressed.Conditions)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The first status: one event per condition, the kubelet's.
	want := []string{EventNodeHasSufficientMemory, EventNodeHasNoDiskPressure, EventNodeHasSufficientPID, EventNodeReady}
	if diff := cmp.Diff(want, conditionEvents(nil, calm.Conditions)); diff != "" {
		t.Errorf("first events (-want +got):\n%s", diff)
	}
	notReady := f.statusOf(calm, observed{health: fmt.Errorf("runtime down")}, t1)
	if diff := cmp.Diff([]string{EventNodeNotReady}, conditionEvents(calm.Conditions, notReady.Conditions)); diff != "" {
		t.Errorf("not ready events (-want +got):\n%s", diff)
	}
}

func TestImages(t *testing.T) {
	var imgs []*runtimeapi.Image
	for i := range 60 {
		imgs = append(imgs, &runtimeapi.Image{
			Id: fmt.Sprintf("sha256:%02d", i), Size: uint64(1000 + i%7),
			RepoTags:    []string{fmt.Sprintf("img%d:1", i), fmt.Sprintf("img%d:latest", i), "a", "b", "c"},
			RepoDigests: []string{fmt.Sprintf("img%d@sha256:%02d", i, i)},
		})
	}
	got := Images(imgs, MaxImages)
	if len(got) != 50 {
		t.Fatalf("%d images, want the kubelet's cap of 50", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].SizeBytes > got[i-1].SizeBytes {
			t.Fatalf("images not largest first at %d: %d after %d", i, got[i].SizeBytes, got[i-1].SizeBytes)
		}
	}
	if n := got[0].Names; len(n) != 5 || !strings.Contains(n[0], "@sha256:") {
		t.Errorf("names %v, want at most 5, digests first", n)
	}
	if got[0].SizeBytes != 1006 {
		t.Errorf("largest %d, want 1006", got[0].SizeBytes)
	}
}

func TestKubernetesVersion(t *testing.T) {
	v := KubernetesVersion()
	if !strings.HasPrefix(v, "v1.") || strings.Count(v, ".") != 2 {
		t.Errorf("KubernetesVersion() = %q, want a v1.N.P semver", v)
	}
}
