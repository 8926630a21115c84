package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
