package runtime_test

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/runtime"
)

// hashedContainer is a container with most of its fields set.
func hashedContainer() *v1.Container {
	return &v1.Container{
		Name: "app", Image: "busybox:1.36", Command: []string{"sh", "-c"}, Args: []string{"sleep 3600"},
		WorkingDir: "/w", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
		Env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		},
		VolumeMounts:           []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
		LivenessProbe:          &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
		ReadinessProbe:         &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		ImagePullPolicy: v1.PullIfNotPresent,
		SecurityContext: &v1.SecurityContext{RunAsNonRoot: new(true), Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}}},
	}
}

// TestHashContainerValue: the hash is the FNV-64a of the container's JSON
// with its resources cleared, the value recorded on the containers that
// earlier agents created, and hashing leaves the container as it was.
func TestHashContainerValue(t *testing.T) {
	c := hashedContainer()
	before := c.DeepCopy()
	cp := c.DeepCopy()
	cp.Resources = v1.ResourceRequirements{}
	data, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	h.Write(data)
	want := strconv.FormatUint(h.Sum64(), 16)
	if got := runtime.HashContainer(c); got != want {
		t.Errorf("HashContainer = %s, want %s", got, want)
	}
	if !equality.Semantic.DeepEqual(c, before) {
		t.Error("HashContainer changed the container")
	}
}

// BenchmarkHashContainer is the hash a sync computes for each running
// container and a start for each container it creates.
func BenchmarkHashContainer(b *testing.B) {
	c := hashedContainer()
	b.ReportAllocs()
	for b.Loop() {
		runtime.HashContainer(c)
	}
}
