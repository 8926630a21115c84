package podmodel

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func resizeTestPod(uid string, cpuReq, cpuLim, memReq, memLim string) *v1.Pod {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	for _, x := range []struct {
		l v1.ResourceList
		n v1.ResourceName
		s string
	}{{r.Requests, v1.ResourceCPU, cpuReq}, {r.Limits, v1.ResourceCPU, cpuLim}, {r.Requests, v1.ResourceMemory, memReq}, {r.Limits, v1.ResourceMemory, memLim}} {
		if x.s != "" {
			x.l[x.n] = resource.MustParse(x.s)
		}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid),
			Annotations: map[string]string{AnnotationSource: APIServerSource}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: r}}},
	}
}

// withInit adds an init container "init" (a sidecar when sidecar) with
// the given cpu and memory requests.
func withInit(p *v1.Pod, sidecar bool, cpu, mem string) *v1.Pod {
	c := v1.Container{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem),
	}}}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

// withPodLevel sets the pod's pod-level resources (spec.resources).
func withPodLevel(p *v1.Pod, cpuReq, cpuLim, memReq, memLim string) *v1.Pod {
	p.Spec.Resources = resizeTestPod("x", cpuReq, cpuLim, memReq, memLim).Spec.Containers[0].Resources.DeepCopy()
	return p
}

// TestDecideResize holds the kubelet's rules for a resize (allocation
// manager tests: TestHandlePodResourcesResize): static pods and QoS
// changes are infeasible, requests beyond the node's allocatable
// resources are infeasible (memory reported first), requests that do not
// fit beside the other pods' allocations are deferred (cpu reported
// first), the rest is allocated. Init containers, sidecars or not, resize
// as app containers do (InPlacePodVerticalScalingInitContainers, locked
// on in 1.37).
func TestDecideResize(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("4Gi")}
	other := resizeTestPod("other", "2", "", "2Gi", "")
	tests := []struct {
		name        string
		pod         *v1.Pod
		allocated   *v1.Pod
		others      []*v1.Pod
		wantReason  string
		wantMessage string
	}{
		{
			name:      "cpu increase that fits",
			pod:       resizeTestPod("p", "1500m", "", "1Gi", ""),
			allocated: resizeTestPod("p", "1", "", "1Gi", ""),
			others:    []*v1.Pod{other},
		},
		{
			name:        "cpu increase beside other pods: deferred",
			pod:         resizeTestPod("p", "2500m", "", "1Gi", ""),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			others:      []*v1.Pod{other},
			wantReason:  v1.PodReasonDeferred,
			wantMessage: "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000",
		},
		{
			name:        "memory increase beside other pods: deferred",
			pod:         resizeTestPod("p", "1", "", "2500Mi", ""),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			others:      []*v1.Pod{other},
			wantReason:  v1.PodReasonDeferred,
			wantMessage: "Node didn't have enough resource: memory, requested: 2621440000, used: 2147483648, capacity: 4294967296",
		},
		{
			name:        "memory beyond the node: infeasible",
			pod:         resizeTestPod("p", "1", "", "4500Mi", ""),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: "Node didn't have enough capacity: memory, requested: 4718592000, capacity: 4294967296",
		},
		{
			name:        "cpu beyond the node: infeasible",
			pod:         resizeTestPod("p", "5", "", "1Gi", ""),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000",
		},
		{
			name:        "both beyond the node: memory reported",
			pod:         resizeTestPod("p", "5", "", "5Gi", ""),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296",
		},
		{
			name:      "a decrease always fits",
			pod:       resizeTestPod("p", "500m", "", "512Mi", ""),
			allocated: resizeTestPod("p", "1", "", "1Gi", ""),
			others:    []*v1.Pod{resizeTestPod("big", "3", "", "3Gi", "")},
		},
		{
			name:        "QoS class change: infeasible",
			pod:         resizeTestPod("p", "1", "1", "1Gi", "1Gi"),
			allocated:   resizeTestPod("p", "1", "2", "1Gi", "1Gi"),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageQOSChange,
		},
		{
			name: "static pod: infeasible",
			pod: func() *v1.Pod {
				p := resizeTestPod("p", "2", "", "1Gi", "")
				p.Annotations[AnnotationSource] = "file"
				return p
			}(),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageStaticPod,
		},
		{
			name: "another resource changed: infeasible",
			pod: func() *v1.Pod {
				p := resizeTestPod("p", "1", "", "1Gi", "")
				p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
				return p
			}(),
			allocated:   resizeTestPod("p", "1", "", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageOnlyCPUMem,
		},
		{
			name:      "pod-level cpu limit increase: allocated",
			pod:       withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "3", "1Gi", ""),
			allocated: withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "2", "1Gi", ""),
			others:    []*v1.Pod{other},
		},
		{
			// The pod-level requests are the pod's: 1500m beside the
			// other pod's 2 fits in 4, whatever the containers ask.
			name:      "pod-level cpu request increase that fits: allocated",
			pod:       withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1500m", "", "1Gi", ""),
			allocated: withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "", "1Gi", ""),
			others:    []*v1.Pod{other},
		},
		{
			name:        "pod-level cpu request increase beside other pods: deferred",
			pod:         withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "2500m", "", "1Gi", ""),
			allocated:   withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "", "1Gi", ""),
			others:      []*v1.Pod{other},
			wantReason:  v1.PodReasonDeferred,
			wantMessage: "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000",
		},
		{
			name:        "pod-level memory request beyond the node: infeasible",
			pod:         withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "", "5Gi", ""),
			allocated:   withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296",
		},
		{
			name: "pod-level resize of a static pod: infeasible",
			pod: func() *v1.Pod {
				p := withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "3", "1Gi", "")
				p.Annotations[AnnotationSource] = "file"
				return p
			}(),
			allocated:   withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "2", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageStaticPod,
		},
		{
			// Pod-level requests equal to limits make the pod
			// Guaranteed; raising the limit alone makes it Burstable.
			name:        "pod-level QoS class change: infeasible",
			pod:         withPodLevel(resizeTestPod("p", "", "", "", ""), "1", "2", "1Gi", "1Gi"),
			allocated:   withPodLevel(resizeTestPod("p", "", "", "", ""), "1", "1", "1Gi", "1Gi"),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageQOSChange,
		},
		{
			name: "pod-level hugepages changed: infeasible",
			pod: func() *v1.Pod {
				p := withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "2", "1Gi", "")
				p.Spec.Resources.Limits["hugepages-2Mi"] = resource.MustParse("4Mi")
				return p
			}(),
			allocated:   withPodLevel(resizeTestPod("p", "1", "", "1Gi", ""), "1", "2", "1Gi", ""),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageOnlyCPUMem,
		},
		{
			name:      "sidecar cpu increase that fits: allocated",
			pod:       withInit(resizeTestPod("p", "1", "", "1Gi", ""), true, "1", "256Mi"),
			allocated: withInit(resizeTestPod("p", "1", "", "1Gi", ""), true, "500m", "256Mi"),
			others:    []*v1.Pod{other},
		},
		{
			// A sidecar's requests add to the app containers': 1 + 1.5
			// beside the other pod's 2 is more than 4.
			name:        "sidecar cpu increase beside other pods: deferred",
			pod:         withInit(resizeTestPod("p", "1", "", "1Gi", ""), true, "1500m", "256Mi"),
			allocated:   withInit(resizeTestPod("p", "1", "", "1Gi", ""), true, "500m", "256Mi"),
			others:      []*v1.Pod{other},
			wantReason:  v1.PodReasonDeferred,
			wantMessage: "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000",
		},
		{
			name:      "regular init container memory increase: allocated",
			pod:       withInit(resizeTestPod("p", "1", "", "1Gi", ""), false, "1", "2Gi"),
			allocated: withInit(resizeTestPod("p", "1", "", "1Gi", ""), false, "1", "1Gi"),
		},
		{
			name: "init container's other resource changed: infeasible",
			pod: func() *v1.Pod {
				p := withInit(resizeTestPod("p", "1", "", "1Gi", ""), true, "1", "256Mi")
				p.Spec.InitContainers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
				return p
			}(),
			allocated:   withInit(resizeTestPod("p", "1", "", "1Gi", ""), true, "1", "256Mi"),
			wantReason:  v1.PodReasonInfeasible,
			wantMessage: ResizeMessageOnlyCPUMem,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := DecideResize(tt.pod, tt.allocated, tt.others, allocatable)
			if reason != tt.wantReason || msg != tt.wantMessage {
				t.Errorf("DecideResize = %q, %q; want %q, %q", reason, msg, tt.wantReason, tt.wantMessage)
			}
		})
	}
}

// TestWithAllocation: the pod's containers, and the pod (spec.resources),
// take their allocated resources, in a copy only when one differs.
func TestWithAllocation(t *testing.T) {
	pod := resizeTestPod("p", "2", "", "1Gi", "")
	if got, changed := WithAllocation(pod, AllocationOf(pod)); changed || got != pod {
		t.Errorf("same allocation: changed %v, copy %v", changed, got != pod)
	}
	if got, changed := WithAllocation(pod, nil); changed || got != pod {
		t.Errorf("no allocation: changed %v", changed)
	}
	alloc := AllocationOf(resizeTestPod("p", "1", "", "1Gi", ""))
	got, changed := WithAllocation(pod, alloc)
	if !changed || got == pod {
		t.Fatalf("other allocation: changed %v, copy %v", changed, got != pod)
	}
	if q := got.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("allocated cpu %s, want 1", q.String())
	}
	if q := pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("the pod was modified: cpu %s", q.String())
	}

	// Pod-level resources are allocated too: a pod asking for others
	// runs with those allocated.
	withPodLevel := func(cpu string) *v1.Pod {
		p := resizeTestPod("p", "1", "", "1Gi", "")
		p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}
		return p
	}
	got, changed = WithAllocation(withPodLevel("3"), AllocationOf(withPodLevel("2")))
	if !changed {
		t.Fatal("a pod-level change was not seen")
	}
	if q := got.Spec.Resources.Limits[v1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("allocated pod-level cpu %s, want 2", q.String())
	}
	if _, changed := WithAllocation(withPodLevel("2"), AllocationOf(withPodLevel("2"))); changed {
		t.Error("same pod-level resources seen as a change")
	}

	// The allocation is the spec's copy: changing it leaves the pod as it
	// was.
	alloc = AllocationOf(pod)
	r, ok := alloc.Get("c")
	if !ok {
		t.Fatal("AllocationOf has no resources for container c")
	}
	r.Requests[v1.ResourceCPU] = resource.MustParse("5")
	if q := pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("the allocation shares the pod's resources: cpu %s", q.String())
	}
}

// TestAllocationJSON: an Allocation is encoded as an object of the
// resources by name, as the allocation checkpoint has always held it (a
// null value is no resources), and decodes back in name order.
func TestAllocationJSON(t *testing.T) {
	pod := withInit(resizeTestPod("p", "2", "", "1Gi", ""), false, "100m", "64Mi")
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}
	alloc := AllocationOf(pod)
	if len(alloc) != 3 || alloc[0].Name != "init" || alloc[1].Name != "c" || alloc[2].Name != PodLevelKey {
		t.Fatalf("AllocationOf = %v, want init, c and the pod's, in this order", alloc)
	}
	data, err := json.Marshal(alloc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"":{"limits":{"cpu":"3"}},"c":{"requests":{"cpu":"2","memory":"1Gi"}},"init":{"requests":{"cpu":"100m","memory":"64Mi"}}}`
	if string(data) != want {
		t.Errorf("JSON %s, want %s", data, want)
	}
	var back Allocation
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Allocation{alloc[2], alloc[1], alloc[0]}, back, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	if got, changed := WithAllocation(pod, back); changed || got != pod {
		t.Errorf("the decoded allocation changes the pod (changed %v)", changed)
	}

	// A null value allocates no resources.
	if err := json.Unmarshal([]byte(`{"c":null,"":null}`), &back); err != nil {
		t.Fatal(err)
	}
	got, changed := WithAllocation(pod, back)
	if !changed || got.Spec.Containers[0].Resources.Requests != nil || got.Spec.Resources == nil || got.Spec.Resources.Limits != nil {
		t.Errorf("null allocations: changed %v, container %v, pod %v", changed, got.Spec.Containers[0].Resources, got.Spec.Resources)
	}
	if got.Spec.InitContainers[0].Resources.Requests.Cpu().Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("a container the allocation does not name lost its resources: %v", got.Spec.InitContainers[0].Resources)
	}
	back = Allocation{}
	if err := json.Unmarshal([]byte("null"), &back); err != nil || back != nil {
		t.Errorf("decoding null: %v, %v; want a nil Allocation", back, err)
	}
	if data, err := json.Marshal(Allocation(nil)); err != nil || string(data) != "null" {
		t.Errorf("encoding a nil Allocation: %s, %v; want null", data, err)
	}
}

// TestResizeEventMessage: the kubelet's resize event messages, the
// prefix then the containers' resources, the generation and the error as
// JSON (as kubectl describe shows them from a kubelet).
func TestResizeEventMessage(t *testing.T) {
	pod := withInit(resizeTestPod("p", "2", "2", "1Gi", "1Gi"), true, "100m", "64Mi")
	tests := []struct {
		prefix, errMsg string
		want           string
	}{
		{
			prefix: "Pod resize started",
			want: `Pod resize started: {"initContainers":[{"name":"init","resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}],` +
				`"containers":[{"name":"c","resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":{"cpu":"2","memory":"1Gi"}}}],"generation":2}`,
		},
		{
			prefix: "Pod resize Deferred",
			errMsg: "Node didn't have enough resource: cpu, requested: 6000, used: 3950, capacity: 8000",
			want: `Pod resize Deferred: {"initContainers":[{"name":"init","resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}],` +
				`"containers":[{"name":"c","resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":{"cpu":"2","memory":"1Gi"}}}],"generation":2,` +
				`"error":"Node didn't have enough resource: cpu, requested: 6000, used: 3950, capacity: 8000"}`,
		},
	}
	for _, tt := range tests {
		if got := ResizeEventMessage(tt.prefix, pod, 2, tt.errMsg); got != tt.want {
			t.Errorf("ResizeEventMessage(%q) =\n%s\nwant\n%s", tt.prefix, got, tt.want)
		}
	}
}
