package sources_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sources"
)

func ExampleNewConfig() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A source that sends one snapshot with one pod, then waits.
	static := sources.SourceFunc(func(ctx context.Context, snapshots chan<- []*v1.Pod) error {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
		}
		sources.StaticPodDefaults(pod, "/etc/kubernetes/manifests/web.yaml", "node-1")
		select {
		case snapshots <- []*v1.Pod{pod}:
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	})

	cfg := sources.NewConfig(sources.ConfigOptions{})
	if err := cfg.Add(sources.FileSource, static); err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- cfg.Run(ctx) }()

	u := <-cfg.Updates()
	fmt.Println(u.Op, u.Source, u.Pods[0].Name, u.Pods[0].Annotations[sources.AnnotationSource])
	cancel()
	<-done
	// Output: ADD file web-node-1 file
}
