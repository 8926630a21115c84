package configmap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/configmap"
)

func ExampleNewForClient() {
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Data:       map[string]string{"level": "debug"},
	})
	p, err := configmap.NewForClient(clientset.From(client), configmap.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	vol := v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "app"},
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"}}
	m, err := p.SetUp(context.Background(), volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: filepath.Join(root, "config")})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(m.HostPath, "level"))
	fmt.Println(string(b), m.ReadOnly, p.RequiresRefresh(&vol))
	// Output: debug true true
}

func ExampleNew() {
	get := configmap.GetterFunc(func(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
		return &v1.ConfigMap{Data: map[string]string{"greeting": "hello from " + namespace + "/" + name}}, nil
	})
	p, err := configmap.New(get, configmap.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	vol := v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "app"},
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web", UID: "uid-1"}}
	m, err := p.SetUp(context.Background(), volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: filepath.Join(root, "config")})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(m.HostPath, "greeting"))
	fmt.Println(string(b))
	// Output: hello from prod/app
}
