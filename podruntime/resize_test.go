package podruntime

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

func resources(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	set := func(l v1.ResourceList, n v1.ResourceName, s string) {
		if s != "" {
			l[n] = resource.MustParse(s)
		}
	}
	set(r.Requests, v1.ResourceCPU, cpuReq)
	set(r.Limits, v1.ResourceCPU, cpuLim)
	set(r.Requests, v1.ResourceMemory, memReq)
	set(r.Limits, v1.ResourceMemory, memLim)
	return r
}

// reported is what a runtime reports for a container created with r, as
// linuxResources converts it (period 100ms).
func reported(r v1.ResourceRequirements) *runtime.ContainerResources {
	c := &v1.Container{Resources: r}
	st := &runtimeapi.ContainerStatus{Id: "c", Resources: &runtimeapi.ContainerResources{Linux: linuxResources(c, 100000)}}
	return (&runtime.PodStatus{}).AddContainerStatus(&runtimeapi.Container{Id: "c"}, st, "").Resources
}

// TestComputePodResizeAction holds the kubelet's rules for a running
// container whose allocated resources differ from the runtime's
// (kuberuntime TestComputePodActionsForPodResize, rewritten).
func TestComputePodResizeAction(t *testing.T) {
	restart := func(name v1.ResourceName) v1.ContainerResizePolicy {
		return v1.ContainerResizePolicy{ResourceName: name, RestartPolicy: v1.RestartContainer}
	}
	notRequired := func(name v1.ResourceName) v1.ContainerResizePolicy {
		return v1.ContainerResizePolicy{ResourceName: name, RestartPolicy: v1.NotRequired}
	}
	type update struct {
		Name     string
		Resource v1.ResourceName
	}
	tests := []struct {
		name        string
		spec        []v1.ResourceRequirements // allocated, per container
		actual      []v1.ResourceRequirements // as created
		policy      []v1.ContainerResizePolicy
		noResources bool
		wantKeep    []bool
		wantUpdates []update
		wantKill    []string
		wantPodRes  bool
	}{
		{
			name:     "nothing changed",
			spec:     []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			actual:   []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			wantKeep: []bool{true},
		},
		{
			name:        "cpu limit up, in place by default",
			spec:        []v1.ResourceRequirements{resources("100m", "400m", "100Mi", "200Mi")},
			actual:      []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			wantKeep:    []bool{true},
			wantUpdates: []update{{"c0", v1.ResourceCPU}},
		},
		{
			name:        "cpu request and memory limit, NotRequired",
			spec:        []v1.ResourceRequirements{resources("200m", "400m", "100Mi", "300Mi")},
			actual:      []v1.ResourceRequirements{resources("100m", "400m", "100Mi", "200Mi")},
			policy:      []v1.ContainerResizePolicy{notRequired(v1.ResourceCPU), notRequired(v1.ResourceMemory)},
			wantKeep:    []bool{true},
			wantUpdates: []update{{"c0", v1.ResourceCPU}, {"c0", v1.ResourceMemory}},
		},
		{
			name:       "memory with RestartContainer restarts",
			spec:       []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "300Mi")},
			actual:     []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			policy:     []v1.ContainerResizePolicy{restart(v1.ResourceMemory)},
			wantKeep:   []bool{false},
			wantKill:   []string{"c0"},
			wantPodRes: true,
		},
		{
			name:        "cpu change with memory RestartContainer stays in place",
			spec:        []v1.ResourceRequirements{resources("300m", "400m", "100Mi", "200Mi")},
			actual:      []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			policy:      []v1.ContainerResizePolicy{restart(v1.ResourceMemory)},
			wantKeep:    []bool{true},
			wantUpdates: []update{{"c0", v1.ResourceCPU}},
		},
		{
			name:     "memory request alone: nothing to actuate",
			spec:     []v1.ResourceRequirements{resources("100m", "200m", "150Mi", "200Mi")},
			actual:   []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			wantKeep: []bool{true},
		},
		{
			name:     "requests at or below the minimum shares are equal",
			spec:     []v1.ResourceRequirements{resources("1m", "", "", "")},
			actual:   []v1.ResourceRequirements{resources("2m", "", "", "")},
			wantKeep: []bool{true},
		},
		{
			name:     "limits at or below the minimum quota are equal",
			spec:     []v1.ResourceRequirements{resources("1m", "5m", "", "")},
			actual:   []v1.ResourceRequirements{resources("1m", "10m", "", "")},
			wantKeep: []bool{true},
		},
		{
			name:        "no runtime resources: kept, nothing done",
			spec:        []v1.ResourceRequirements{resources("100m", "400m", "100Mi", "200Mi")},
			actual:      []v1.ResourceRequirements{resources("100m", "200m", "100Mi", "200Mi")},
			noResources: true,
			wantKeep:    []bool{true},
		},
		{
			name: "decreases before increases",
			spec: []v1.ResourceRequirements{
				resources("100m", "300m", "100Mi", "200Mi"),
				resources("100m", "100m", "100Mi", "200Mi"),
			},
			actual: []v1.ResourceRequirements{
				resources("100m", "200m", "100Mi", "200Mi"),
				resources("100m", "200m", "100Mi", "200Mi"),
			},
			wantKeep:    []bool{true, true},
			wantUpdates: []update{{"c1", v1.ResourceCPU}, {"c0", v1.ResourceCPU}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod("p")
			var a podActions
			var keep []bool
			for i := range tt.spec {
				name := fmt.Sprintf("c%d", i)
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: name, Image: "busybox:1.36", Resources: tt.spec[i], ResizePolicy: tt.policy})
			}
			for i := range tt.spec {
				st := cs(pod, fmt.Sprintf("c%d", i), runtime.ContainerStateRunning, 0)
				if !tt.noResources {
					st.Resources = reported(tt.actual[i])
				}
				keep = append(keep, computePodResizeAction(pod, i, st, &a))
			}
			if d := cmp.Diff(tt.wantKeep, keep); d != "" {
				t.Errorf("keep (-want +got):\n%s", d)
			}
			var updates []update
			for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				for _, u := range a.ContainersToUpdate[r] {
					updates = append(updates, update{u.Container.Name, r})
				}
			}
			if d := cmp.Diff(tt.wantUpdates, updates); d != "" {
				t.Errorf("updates (-want +got):\n%s", d)
			}
			var kills []string
			for _, k := range a.ContainersToKill {
				kills = append(kills, k.Name)
				if k.Message != "Container "+k.Name+" resize requires restart" {
					t.Errorf("kill message %q", k.Message)
				}
			}
			if d := cmp.Diff(tt.wantKill, kills); d != "" {
				t.Errorf("kills (-want +got):\n%s", d)
			}
			if a.UpdatePodResources != tt.wantPodRes {
				t.Errorf("UpdatePodResources = %v, want %v", a.UpdatePodResources, tt.wantPodRes)
			}
		})
	}
}

// TestComputePodActionsSidecarResize: a running restartable init
// container (sidecar) is resized as an app container is
// (InPlacePodVerticalScalingInitContainers, locked on in 1.37): updated in
// place by default, killed and started again, as an init container, when
// the changed resource's resizePolicy is RestartContainer; never for a
// static pod.
func TestComputePodActionsSidecarResize(t *testing.T) {
	running := resources("100m", "200m", "100Mi", "200Mi")
	tests := []struct {
		name        string
		spec        v1.ResourceRequirements
		policy      []v1.ContainerResizePolicy
		static      bool
		wantUpdates []v1.ResourceName
		wantKill    bool
	}{
		{name: "unchanged", spec: running},
		{name: "cpu limit up: in place", spec: resources("100m", "400m", "100Mi", "200Mi"), wantUpdates: []v1.ResourceName{v1.ResourceCPU}},
		{name: "memory limit down: in place", spec: resources("100m", "200m", "100Mi", "150Mi"), wantUpdates: []v1.ResourceName{v1.ResourceMemory}},
		{
			name:     "memory with RestartContainer: restarted as an init container",
			spec:     resources("100m", "200m", "100Mi", "300Mi"),
			policy:   []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
			wantKill: true,
		},
		{name: "static pod: not resized", spec: resources("100m", "400m", "100Mi", "200Mi"), static: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod("p", "a")
			if tt.static {
				pod.Annotations = map[string]string{podmodel.AnnotationSource: "file"}
			}
			pod.Spec.InitContainers = []v1.Container{{Name: "side", Image: "busybox:1.36", RestartPolicy: ptr(v1.ContainerRestartPolicyAlways),
				Resources: tt.spec, ResizePolicy: tt.policy}}
			side := cs(pod, "side", runtime.ContainerStateRunning, 0)
			side.Resources = reported(running)
			status := &runtime.PodStatus{
				SandboxStatuses:   []*runtimeapi.PodSandboxStatus{readySandbox()},
				ContainerStatuses: []*runtime.ContainerStatus{cs(pod, "a", runtime.ContainerStateRunning, 0), side},
			}
			got := computePodActions(pod, status, SyncPodOptions{})
			var updates []v1.ResourceName
			for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				for _, u := range got.ContainersToUpdate[r] {
					if u.Container.Name != "side" || u.ID != "side-id" {
						t.Errorf("update of %s (%s), want the sidecar", u.Container.Name, u.ID)
					}
					updates = append(updates, r)
				}
			}
			if d := cmp.Diff(tt.wantUpdates, updates); d != "" {
				t.Errorf("updates (-want +got):\n%s", d)
			}
			var wantKill []containerToKill
			var wantInit []int
			if tt.wantKill {
				wantKill = []containerToKill{{ID: "side-id", Name: "side", Container: &pod.Spec.InitContainers[0], Reason: killResize,
					Message: "Container side resize requires restart"}}
				wantInit = []int{0}
			}
			if d := cmp.Diff(wantKill, got.ContainersToKill); d != "" {
				t.Errorf("kills (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantInit, got.InitContainersToStart); d != "" {
				t.Errorf("init containers to start (-want +got):\n%s", d)
			}
			if len(got.ContainersToStart) != 0 || got.KillPod || got.UpdatePodResources != tt.wantKill {
				t.Errorf("start %v, kill pod %v, update pod resources %v", got.ContainersToStart, got.KillPod, got.UpdatePodResources)
			}
		})
	}
}
