package podmodel

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// res parses "cpu=1,memory=1Gi" requests and limits.
func res(req, lim string) v1.ResourceRequirements {
	parse := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		l := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return l
	}
	return v1.ResourceRequirements{Requests: parse(req), Limits: parse(lim)}
}

// TestQOSClass holds the kubelet's ComputePodQOS rules, the pod-level
// resources (PodLevelResources, on by default) among them.
func TestQOSClass(t *testing.T) {
	podLevel := func(r v1.ResourceRequirements) *v1.ResourceRequirements { return &r }
	tests := []struct {
		name     string
		res      []v1.ResourceRequirements
		init     []v1.ResourceRequirements
		podLevel *v1.ResourceRequirements
		status   v1.PodQOSClass
		want     v1.PodQOSClass
	}{
		{name: "nothing", res: []v1.ResourceRequirements{{}}, want: v1.PodQOSBestEffort},
		{name: "only extended resources", res: []v1.ResourceRequirements{res("example.com/gpu=1", "example.com/gpu=1")}, want: v1.PodQOSBestEffort},
		{name: "requests equal limits", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")}, want: v1.PodQOSGuaranteed},
		{name: "zero requests ignored", res: []v1.ResourceRequirements{res("cpu=0", "")}, want: v1.PodQOSBestEffort},
		{name: "limits only (not defaulted)", res: []v1.ResourceRequirements{res("", "cpu=1,memory=1Gi")}, want: v1.PodQOSBurstable},
		{name: "requests below limits", res: []v1.ResourceRequirements{res("cpu=500m,memory=1Gi", "cpu=1,memory=1Gi")}, want: v1.PodQOSBurstable},
		{name: "a container without limits", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi"), {}}, want: v1.PodQOSBurstable},
		{name: "memory limit only", res: []v1.ResourceRequirements{res("memory=1Gi", "memory=1Gi")}, want: v1.PodQOSBurstable},
		{name: "init container breaks guarantee", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			init: []v1.ResourceRequirements{res("cpu=1", "")}, want: v1.PodQOSBurstable},
		{name: "guaranteed init and app containers", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			init: []v1.ResourceRequirements{res("cpu=2,memory=1Gi", "cpu=2,memory=1Gi")}, want: v1.PodQOSGuaranteed},
		{name: "status.qosClass wins", res: []v1.ResourceRequirements{{}}, status: v1.PodQOSBurstable, want: v1.PodQOSBurstable},

		// Pod-level resources.
		{name: "pod-level requests equal limits, container without resources", res: []v1.ResourceRequirements{{}},
			podLevel: podLevel(res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), want: v1.PodQOSGuaranteed},
		{name: "pod-level decide over guaranteed containers", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			podLevel: podLevel(res("cpu=2,memory=2Gi", "cpu=4,memory=2Gi")), want: v1.PodQOSBurstable},
		{name: "pod-level decide over best-effort containers", res: []v1.ResourceRequirements{{}},
			podLevel: podLevel(res("cpu=500m", "")), want: v1.PodQOSBurstable},
		{name: "pod-level cpu limit only", res: []v1.ResourceRequirements{{}},
			podLevel: podLevel(res("", "cpu=1")), want: v1.PodQOSBurstable},
		{name: "pod-level requests without limits", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			podLevel: podLevel(res("cpu=1,memory=1Gi", "")), want: v1.PodQOSBurstable},
		{name: "empty spec.resources does not count", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			podLevel: &v1.ResourceRequirements{}, want: v1.PodQOSGuaranteed},
		{name: "spec.resources with hugepages only does not count", res: []v1.ResourceRequirements{res("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			podLevel: podLevel(res("hugepages-2Mi=4Mi", "hugepages-2Mi=4Mi")), want: v1.PodQOSGuaranteed},
		{name: "pod-level with zero quantities is best effort", res: []v1.ResourceRequirements{res("cpu=1", "")},
			podLevel: podLevel(res("cpu=0", "memory=0")), want: v1.PodQOSBestEffort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{}
			for i, r := range tt.res {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Resources: r})
			}
			for i, r := range tt.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: fmt.Sprint("i", i), Resources: r})
			}
			pod.Spec.Resources = tt.podLevel
			pod.Status.QOSClass = tt.status
			if got := QOSClass(pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPhaseTerminal(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	s := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "b", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}},
	}}
	if got := Phase(pod, s, false, true); got != v1.PodRunning {
		t.Errorf("not terminal, Always: %s, want Running", got)
	}
	if got := Phase(pod, s, true, true); got != v1.PodFailed {
		t.Errorf("terminal with a failure: %s, want Failed", got)
	}
	s.ContainerStatuses[1].State.Terminated.ExitCode = 0
	if got := Phase(pod, s, true, true); got != v1.PodSucceeded {
		t.Errorf("terminal, all succeeded: %s, want Succeeded", got)
	}
}
