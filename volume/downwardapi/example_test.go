package downwardapi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/downwardapi"
)

func ExampleNew() {
	// NoTmpfs: the example runs without root.
	p := downwardapi.New(downwardapi.Options{NoTmpfs: true})
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	vol := v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}},
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "web", UID: "uid-1",
		Labels: map[string]string{"app": "web", "tier": "front"},
	}}
	m, err := p.SetUp(context.Background(), volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: filepath.Join(root, "podinfo")})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(m.HostPath, "labels"))
	fmt.Println(string(b))
	// Output:
	// app="web"
	// tier="front"
}
