package runtime

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestSyncPodCreatesSandboxAndContainers(t *testing.T) {
	f := newFakes(t, ManagerOptions{})
	pod := testPod("web", "a", "b")
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"note": "x"}
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "PLAIN", Value: "v"},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "REF", Value: "$(PLAIN)-$(POD_NAME)"},
	}
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}

	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	wantCalls := []string{"RunPodSandbox", "CreateContainer", "StartContainer", "CreateContainer", "StartContainer"}
	if diff := cmp.Diff(wantCalls, f.calls()); diff != "" {
		t.Errorf("runtime calls (-want +got):\n%s", diff)
	}

	f.rs.Lock()
	if len(f.rs.Sandboxes) != 1 {
		t.Fatalf("sandboxes = %d, want 1", len(f.rs.Sandboxes))
	}
	var sb *critest.FakePodSandbox
	for _, s := range f.rs.Sandboxes {
		sb = s
	}
	f.rs.Unlock()
	wantLabels := map[string]string{"app": "web", LabelPodName: "web", LabelPodNamespace: "default", LabelPodUID: "web-uid"}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("sandbox labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"note": "x"}, sb.Annotations); diff != "" {
		t.Errorf("sandbox annotations (-want +got):\n%s", diff)
	}
	if md := sb.Metadata; md.Name != "web" || md.Namespace != "default" || md.Uid != "web-uid" || md.Attempt != 0 {
		t.Errorf("sandbox metadata = %v", md)
	}

	a := f.container(pod, "a")
	wantCLabels := map[string]string{
		LabelPodName: "web", LabelPodNamespace: "default", LabelPodUID: "web-uid",
		LabelContainerName: "a", LabelContainerHash: HashContainer(&pod.Spec.Containers[0]),
	}
	if diff := cmp.Diff(wantCLabels, a.Labels); diff != "" {
		t.Errorf("container labels (-want +got):\n%s", diff)
	}
	wantAnn := map[string]string{
		AnnotationRestartCount: "0", AnnotationPodTerminationGracePeriod: "30",
		AnnotationTerminationMessagePath: "", AnnotationTerminationMessagePolicy: "",
		AnnotationContainerIndex: "0", AnnotationContainerType: ContainerTypeRegular,
	}
	if diff := cmp.Diff(wantAnn, a.Annotations); diff != "" {
		t.Errorf("container annotations (-want +got):\n%s", diff)
	}
	if a.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container a state = %v, want running", a.State)
	}
	if b := f.container(pod, "b"); b.Annotations[AnnotationContainerIndex] != "1" {
		t.Errorf("container b index = %q, want 1", b.Annotations[AnnotationContainerIndex])
	}
}

func TestSyncPodIsIdempotent(t *testing.T) {
	f := newFakes(t, ManagerOptions{})
	pod := testPod("idem", "a")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	f.calls()
	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); len(got) != 0 {
		t.Errorf("second sync made calls %v, want none", got)
	}
	if len(res.Results) != 0 {
		t.Errorf("second sync results = %v, want none", res.Results)
	}
}

var _ = filepath.Join
