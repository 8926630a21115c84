package status

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// resizeErrors implements WaitingReasons and ResizeErrors.
type resizeErrors map[types.UID]string

func (resizeErrors) WaitingReason(types.UID, string) (string, string, bool) { return "", "", false }
func (r resizeErrors) ResizeError(uid types.UID) (string, bool) {
	m, ok := r[uid]
	return m, ok
}

// TestGenerateResize holds the kubelet's resize status rules: the
// allocated requests as allocatedResources; the runtime's CPU and memory
// as resources (the memory request as allocated); PodResizeInProgress
// while they differ from the allocation, with reason Error and the
// message of a failed attempt; PodResizePending as decided.
func TestGenerateResize(t *testing.T) {
	q := resource.MustParse
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid", Generation: 3},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("64Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("400m"), v1.ResourceMemory: q("128Mi")},
		}}}},
	}
	at := func(cpuReq, cpuLim, memLim string) *runtime.PodStatus {
		cs := running("app", 0)
		cs.SandboxID = readySandbox().GetId()
		cs.Hash = runtime.HashContainer(&pod.Spec.Containers[0])
		cs.Resources = &runtime.ContainerResources{CPURequest: ptrQ(q(cpuReq)), CPULimit: ptrQ(q(cpuLim)), MemoryLimit: ptrQ(q(memLim))}
		return readyPodStatus(cs)
	}
	conds := func(s v1.PodStatus) []string {
		var out []string
		for _, c := range s.Conditions {
			if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
				out = append(out, string(c.Type)+" "+c.Reason+" "+c.Message)
				if c.ObservedGeneration != 3 {
					t.Errorf("%s observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
				}
			}
		}
		return out
	}

	done := Generate(Input{Pod: pod, Runtime: at("200m", "400m", "128Mi"), RuntimeName: "cri"})
	if c := conds(done); c != nil {
		t.Errorf("resized pod has conditions %v", c)
	}
	cs := done.ContainerStatuses[0]
	wantAlloc := v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("64Mi")}
	if d := cmp.Diff(wantAlloc, cs.AllocatedResources); d != "" {
		t.Errorf("allocatedResources (-want +got):\n%s", d)
	}
	wantRes := &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: q("400m"), v1.ResourceMemory: q("128Mi")},
	}
	if d := cmp.Diff(wantRes, cs.Resources); d != "" {
		t.Errorf("resources (-want +got):\n%s", d)
	}

	behind := Generate(Input{Pod: pod, Runtime: at("100m", "200m", "64Mi"), RuntimeName: "cri"})
	if d := cmp.Diff([]string{"PodResizeInProgress  "}, conds(behind)); d != "" {
		t.Errorf("resize in progress (-want +got):\n%s", d)
	}
	if got := behind.ContainerStatuses[0].Resources.Limits[v1.ResourceMemory]; got.Cmp(q("64Mi")) != 0 {
		t.Errorf("status memory limit %s, want the runtime's 64Mi", got.String())
	}

	failed := Generate(Input{Pod: pod, Runtime: at("100m", "200m", "64Mi"), RuntimeName: "cri", Waiting: resizeErrors{"uid": "refused"}})
	if d := cmp.Diff([]string{"PodResizeInProgress Error refused"}, conds(failed)); d != "" {
		t.Errorf("failed resize (-want +got):\n%s", d)
	}

	pending := &v1.PodCondition{Reason: v1.PodReasonInfeasible, Message: "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000", ObservedGeneration: 3}
	inf := Generate(Input{Pod: pod, Runtime: at("200m", "400m", "128Mi"), RuntimeName: "cri", ResizePending: pending})
	if d := cmp.Diff([]string{"PodResizePending Infeasible " + pending.Message}, conds(inf)); d != "" {
		t.Errorf("pending resize (-want +got):\n%s", d)
	}

	// A stale resize condition the pod carries is the agent's to drop.
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred}}
	if c := conds(Generate(Input{Pod: pod, Runtime: at("200m", "400m", "128Mi"), RuntimeName: "cri"})); c != nil {
		t.Errorf("a stale PodResizePending was kept: %v", c)
	}
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }

// TestResizeInProgressSidecar: a running sidecar whose runtime resources
// lag its allocation keeps PodResizeInProgress, as an app container does;
// a regular init container does not (it is not resized while it runs).
func TestResizeInProgressSidecar(t *testing.T) {
	q := resource.MustParse
	always := v1.ContainerRestartPolicyAlways
	alloc := v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("400m"), v1.ResourceMemory: q("128Mi")}}
	for _, tt := range []struct {
		name    string
		sidecar bool
		cpuLim  string
		want    bool
	}{
		{"sidecar behind", true, "200m", true},
		{"sidecar resized", true, "400m", false},
		{"regular init container behind", false, "200m", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"},
				Spec: v1.PodSpec{
					InitContainers: []v1.Container{{Name: "side", Resources: alloc}},
					Containers:     []v1.Container{{Name: "app"}},
				},
			}
			if tt.sidecar {
				pod.Spec.InitContainers[0].RestartPolicy = &always
			}
			side := running("side", 0)
			side.SandboxID = readySandbox().GetId()
			side.Resources = &runtime.ContainerResources{CPURequest: ptrQ(q(tt.cpuLim)), CPULimit: ptrQ(q(tt.cpuLim)), MemoryLimit: ptrQ(q("128Mi"))}
			app := running("app", 0)
			app.SandboxID = readySandbox().GetId()
			if got := ResizeInProgress(pod, readyPodStatus(side, app)); got != tt.want {
				t.Errorf("ResizeInProgress = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGeneratePodLevelResize: a Running pod with pod-level resources
// reports them as status.allocatedResources (its requests) and
// status.resources (cpu and memory as its cgroup has them), with
// PodResizeInProgress while its cgroup lags the allocation; a pod without
// pod-level resources reports its aggregated ones, and no resize in
// progress for its cgroup.
func TestGeneratePodLevelResize(t *testing.T) {
	q := resource.MustParse
	i64 := func(v int64) *int64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid", Generation: 2},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app"}},
			Resources: &v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("128Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("256Mi")},
			},
		},
	}
	desired := runtime.PodCgroupConfig{CPUShares: u64(512), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(256 << 20)}
	// The cgroup v2 read back: 500m is 512 shares, weight 20; the weight
	// as shares is 501 for the resize comparison (the fewest shares giving
	// weight 20) and 500 as the kubelet reads it for the status (rounded
	// down), which is the allocated 512 after the v2 round trip.
	matching := runtime.PodCgroupConfig{CPUShares: u64(501), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(256 << 20)}
	matchingRead := runtime.PodCgroupConfig{CPUShares: u64(500), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(256 << 20)}
	lagging := runtime.PodCgroupConfig{CPUShares: u64(256), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(128 << 20)}
	state := func(cur, read runtime.PodCgroupConfig) *PodCgroupState {
		return &PodCgroupState{Current: cur, Desired: desired, CPU: &read, Memory: &read}
	}
	cs := running("app", 0)
	cs.SandboxID = readySandbox().GetId()
	cs.Hash = runtime.HashContainer(&pod.Spec.Containers[0])
	rs := readyPodStatus(cs)
	inProgress := func(s v1.PodStatus) bool {
		for _, c := range s.Conditions {
			if c.Type == v1.PodResizeInProgress {
				return true
			}
		}
		return false
	}
	alloc := v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("128Mi")}
	tests := []struct {
		name         string
		pc           *PodCgroupState
		wantRes      *v1.ResourceRequirements
		wantProgress bool
	}{
		{"cgroup matches", state(matching, matchingRead), pod.Spec.Resources, false},
		{"cgroup unknown", nil, pod.Spec.Resources, false},
		{"cgroup lags", state(lagging, lagging), &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("128Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("128Mi")},
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Generate(Input{Pod: pod, Runtime: rs, RuntimeName: "cri", PodCgroup: tt.pc})
			if d := cmp.Diff(alloc, s.AllocatedResources, cmpQuantity); d != "" {
				t.Errorf("allocatedResources (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantRes, s.Resources, cmpQuantity); d != "" {
				t.Errorf("resources (-want +got):\n%s", d)
			}
			if got := inProgress(s); got != tt.wantProgress {
				t.Errorf("PodResizeInProgress = %v, want %v", got, tt.wantProgress)
			}
		})
	}

	plain := pod.DeepCopy()
	plain.Spec.Resources = nil
	plain.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("500m")}}
	s := Generate(Input{Pod: plain, Runtime: rs, RuntimeName: "cri", PodCgroup: state(matching, matchingRead)})
	wantAlloc := v1.ResourceList{v1.ResourceCPU: q("500m")}
	if d := cmp.Diff(wantAlloc, s.AllocatedResources, cmpQuantity); d != "" {
		t.Errorf("pod without pod-level resources: allocatedResources (-want +got):\n%s", d)
	}
	// Without pod-level resources the round trip is that of no request
	// (2 shares): the cgroup's 500 shares are 489m.
	wantRes := &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("489m")}, Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("256Mi")}}
	if d := cmp.Diff(wantRes, s.Resources, cmpQuantity); d != "" {
		t.Errorf("pod without pod-level resources: resources (-want +got):\n%s", d)
	}
	if inProgress(s) {
		t.Error("pod without pod-level resources: PodResizeInProgress for its cgroup")
	}
}

// cmpQuantity compares quantities by value.
var cmpQuantity = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// TestPodResources: status.allocatedResources and status.resources for
// every pod, the kubelet v1.37.2 convertStatusToAPIStatus and
// convertToAPIPodLevelResourcesStatus rules; the two cases of the
// kubelet's TestConvertToAPIPodLevelResourcesStatus (lossy v2 round trip,
// actuated request) among them.
func TestPodResources(t *testing.T) {
	q := resource.MustParse
	i64 := func(v int64) *int64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	rl := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return out
	}
	container := func(name string, req, lim v1.ResourceList) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	pod := func(phase v1.PodPhase, podLevel *v1.ResourceRequirements, cs ...v1.Container) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: cs, Resources: podLevel}, Status: v1.PodStatus{Phase: phase}}
	}
	// cpu is a cgroup's cpu configuration as read, memory its memory one.
	cpu := func(shares uint64, quota int64) *runtime.PodCgroupConfig {
		return &runtime.PodCgroupConfig{CPUShares: u64(shares), CPUQuota: i64(quota), CPUPeriod: u64(100000)}
	}
	memory := func(limit int64) *runtime.PodCgroupConfig { return &runtime.PodCgroupConfig{Memory: i64(limit)} }
	read := func(c, m *runtime.PodCgroupConfig) *PodCgroupState { return &PodCgroupState{CPU: c, Memory: m} }
	podLevel := &v1.ResourceRequirements{
		Requests: rl("cpu", "50m", "memory", "50Mi"),
		Limits:   rl("cpu", "100m", "memory", "100Mi"),
	}
	running := func(res *v1.ResourceRequirements) *v1.PodStatus {
		return &v1.PodStatus{Phase: v1.PodRunning, Resources: res}
	}
	oldRes := &v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "1Gi"), Limits: rl("cpu", "2", "memory", "2Gi")}
	tests := []struct {
		name      string
		pod       *v1.Pod
		pc        *PodCgroupState
		old       *v1.PodStatus
		wantAlloc v1.ResourceList
		wantRes   *v1.ResourceRequirements
	}{{
		// The kubelet's case: 50m is 51 shares, weight 2, read back as 28
		// shares (28m); quota 0 gives no limit, memory unread.
		name:      "pod-level, lossy cgroup v2 round trip keeps the allocated request",
		pod:       pod(v1.PodRunning, podLevel, v1.Container{Name: "pause"}),
		pc:        read(cpu(28, 0), nil),
		wantAlloc: rl("cpu", "50m", "memory", "50Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "50m", "memory", "50Mi"), Limits: rl("cpu", "100m", "memory", "100Mi")},
	}, {
		name:      "pod-level, actuated request other than the round trip's",
		pod:       pod(v1.PodRunning, podLevel, v1.Container{Name: "pause"}),
		pc:        read(cpu(102, 0), nil),
		wantAlloc: rl("cpu", "50m", "memory", "50Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "50Mi"), Limits: rl("cpu", "100m", "memory", "100Mi")},
	}, {
		name:      "no pod-level resources: the round trip is that of no request, a 50m request reads back as 28m",
		pod:       pod(v1.PodRunning, nil, container("c1", rl("cpu", "50m"), nil)),
		pc:        read(cpu(28, -1), memory(-1)),
		wantAlloc: rl("cpu", "50m"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "28m"), Limits: v1.ResourceList{}},
	}, {
		name:      "pod not running: the aggregated resources, cgroup not consulted",
		pod:       pod(v1.PodPending, podLevel, v1.Container{Name: "pause"}),
		pc:        read(cpu(1024, 99900), memory(999<<20)),
		wantAlloc: rl("cpu", "50m", "memory", "50Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "50m", "memory", "50Mi"), Limits: rl("cpu", "100m", "memory", "100Mi")},
	}, {
		name: "pod not running without pod-level resources: the containers' aggregate, every key",
		pod: pod(v1.PodPending, nil,
			container("a", rl("cpu", "100m", "ephemeral-storage", "1Gi", "example.com/dev", "1"), rl("cpu", "200m", "example.com/dev", "1")),
			container("b", nil, nil)),
		wantAlloc: rl("cpu", "100m", "ephemeral-storage", "1Gi", "example.com/dev", "1"),
		wantRes: &v1.ResourceRequirements{
			Requests: rl("cpu", "100m", "ephemeral-storage", "1Gi", "example.com/dev", "1"),
			Limits:   rl("cpu", "200m", "example.com/dev", "1"),
		},
	}, {
		name: "one container with limits, one without: the cgroup has none, nor has the status",
		pod: pod(v1.PodRunning, nil,
			container("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi")),
			container("b", nil, nil)),
		pc:        read(cpu(102, -1), memory(-1)),
		wantAlloc: rl("cpu", "100m", "memory", "64Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: v1.ResourceList{}},
	}, {
		name: "running: no ephemeral-storage nor extended resources in resources",
		pod: pod(v1.PodRunning, nil,
			container("a", rl("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi", "example.com/dev", "1"),
				rl("cpu", "100m", "memory", "64Mi", "example.com/dev", "1"))),
		pc:        read(cpu(102, 10000), memory(64<<20)),
		wantAlloc: rl("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi", "example.com/dev", "1"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "100m", "memory", "64Mi")},
	}, {
		name:      "cgroup unread, previous status Running: its cpu request and limits kept",
		pod:       pod(v1.PodRunning, nil, container("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi"))),
		old:       running(oldRes),
		pc:        read(nil, nil),
		wantAlloc: rl("cpu", "100m", "memory", "64Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "64Mi"), Limits: rl("cpu", "2", "memory", "2Gi")},
	}, {
		name:      "no pod cgroup (cgroups off), previous status Running: the allocated requests and limits",
		pod:       pod(v1.PodRunning, nil, container("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi"))),
		old:       running(oldRes),
		wantAlloc: rl("cpu", "100m", "memory", "64Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "200m", "memory", "128Mi")},
	}, {
		name:      "cpu unread, memory read, previous status Running: cpu kept, memory limit read",
		pod:       pod(v1.PodRunning, nil, container("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi"))),
		pc:        read(nil, memory(128<<20)),
		old:       running(oldRes),
		wantAlloc: rl("cpu", "100m", "memory", "64Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "64Mi"), Limits: rl("cpu", "2", "memory", "128Mi")},
	}, {
		name:      "no quota, no memory limit, previous status Running: its limits kept",
		pod:       pod(v1.PodRunning, nil, container("a", rl("cpu", "100m"), nil)),
		pc:        read(cpu(102, -1), memory(-1)),
		old:       running(oldRes),
		wantAlloc: rl("cpu", "100m"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "2", "memory", "2Gi")},
	}, {
		name:      "cgroup unread, previous status Pending: nothing kept",
		pod:       pod(v1.PodRunning, nil, container("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi"))),
		old:       &v1.PodStatus{Phase: v1.PodPending, Resources: oldRes},
		pc:        read(nil, nil),
		wantAlloc: rl("cpu", "100m", "memory", "64Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("memory", "64Mi"), Limits: v1.ResourceList{}},
	}, {
		name: "pod-level resources over the containers', cgroup unread: the pod-level ones",
		pod: pod(v1.PodRunning, &v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "300Mi"), Limits: rl("cpu", "500m", "memory", "500Mi")},
			container("c1", rl("cpu", "50m", "memory", "50Mi"), rl("cpu", "50m", "memory", "50Mi"))),
		pc:        read(nil, nil),
		wantAlloc: rl("cpu", "300m", "memory", "300Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "300Mi"), Limits: rl("cpu", "500m", "memory", "500Mi")},
	}, {
		name:      "cgroup lags a resize: cpu and memory as the cgroup has them",
		pod:       pod(v1.PodRunning, nil, container("c1", rl("cpu", "200m", "memory", "200Mi"), rl("cpu", "400m", "memory", "400Mi"))),
		pc:        read(cpu(102, 20000), memory(100<<20)),
		wantAlloc: rl("cpu", "200m", "memory", "200Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "200Mi"), Limits: rl("cpu", "200m", "memory", "100Mi")},
	}, {
		name:      "best effort: minimum shares, no quota, no memory limit",
		pod:       pod(v1.PodRunning, nil, v1.Container{Name: "c1"}),
		pc:        read(cpu(2, -1), memory(-1)),
		wantAlloc: v1.ResourceList{},
		wantRes:   &v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}},
	}, {
		name:      "cpu limit at the smallest quota, no pod-level limit: left out",
		pod:       pod(v1.PodRunning, nil, container("c1", rl("cpu", "5m"), rl("cpu", "5m"))),
		pc:        read(cpu(5, 1000), memory(-1)),
		wantAlloc: rl("cpu", "5m"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "5m"), Limits: v1.ResourceList{}},
	}, {
		name: "overhead counted in allocatedResources and in the memory request",
		pod: func() *v1.Pod {
			p := pod(v1.PodRunning, nil, container("c1", rl("cpu", "100m", "memory", "64Mi"), rl("memory", "64Mi")))
			p.Spec.Overhead = rl("cpu", "10m", "memory", "16Mi")
			return p
		}(),
		pc:        read(nil, nil),
		wantAlloc: rl("cpu", "110m", "memory", "80Mi"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("memory", "80Mi"), Limits: v1.ResourceList{}},
	}, {
		name: "other pod-level fields kept",
		pod: func() *v1.Pod {
			p := pod(v1.PodRunning, &v1.ResourceRequirements{Requests: rl("cpu", "1")}, v1.Container{Name: "c1"})
			p.Spec.Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
			return p
		}(),
		pc:        read(nil, nil),
		wantAlloc: rl("cpu", "1"),
		wantRes:   &v1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: v1.ResourceList{}, Claims: []v1.ResourceClaim{{Name: "gpu"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alloc, res := podResources(tt.pod, tt.pc, tt.old)
			if d := cmp.Diff(tt.wantAlloc, alloc, cmpQuantity); d != "" {
				t.Errorf("allocatedResources (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantRes, res, cmpQuantity); d != "" {
				t.Errorf("resources (-want +got):\n%s", d)
			}
		})
	}
}

// TestCPUSharesEqualAfterV2RoundTrip: the kubelet's shares → weight →
// shares conversion, rounded down.
func TestCPUSharesEqualAfterV2RoundTrip(t *testing.T) {
	for _, tt := range []struct {
		allocated, readback uint64
		want                bool
	}{
		{51, 28, true},   // 50m: weight 2
		{51, 29, false},  // the fewest shares of weight 2 is not the kubelet's read back
		{2, 2, true},     // no request: weight 1
		{512, 500, true}, // 500m: weight 20
		{512, 512, false},
		{262144, 262144, true},
		{300000, 262144, true},
	} {
		if got := cpuSharesEqualAfterV2RoundTrip(tt.allocated, tt.readback); got != tt.want {
			t.Errorf("cpuSharesEqualAfterV2RoundTrip(%d, %d) = %v, want %v", tt.allocated, tt.readback, got, tt.want)
		}
	}
	for _, tt := range []struct {
		milli int64
		want  uint64
	}{{0, 2}, {1, 2}, {50, 51}, {500, 512}, {1000, 1024}, {1 << 20, 262144}} {
		if got := cgroup.MilliCPUToShares(tt.milli); got != tt.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
}

// TestPodResourcesWithoutRequests: a pod that sets no requests or limits
// gets what the aggregation gives it (empty lists, not nil), whether or
// not it is running, with or without init and ephemeral containers.
func TestPodResourcesWithoutRequests(t *testing.T) {
	base := v1.Pod{Spec: v1.PodSpec{
		Containers:     []v1.Container{{Name: "a"}, {Name: "b"}},
		InitContainers: []v1.Container{{Name: "i"}},
	}}
	ephemeral := *base.DeepCopy()
	ephemeral.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e"}}}
	running := *base.DeepCopy()
	running.Status.Phase = v1.PodRunning
	for name, pod := range map[string]*v1.Pod{"pending": &base, "ephemeral": &ephemeral, "running": &running} {
		alloc, res := podResources(pod, nil, nil)
		wantAlloc := podmodel.Requests(pod)
		want := &v1.ResourceRequirements{Requests: wantAlloc.DeepCopy(), Limits: podmodel.Limits(pod)}
		if !reflect.DeepEqual(alloc, wantAlloc) || !reflect.DeepEqual(res, want) {
			t.Errorf("%s: podResources = %#v, %#v; want %#v, %#v", name, alloc, res, wantAlloc, want)
		}
		if alloc == nil || res.Requests == nil || res.Limits == nil {
			t.Errorf("%s: nil lists: %#v, %#v", name, alloc, res)
		}
	}
}
