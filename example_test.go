package nodekit_test

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// An agent with a source of its own, on the in-memory runtime, stopped once
// its pod runs.
func ExampleNew() {
	// A source is a function that sends full snapshots of its pods.
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", UID: "hello-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "hello", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo hello; sleep 3600"},
		}}},
	}
	sources.SetDefaults(pod)
	src := sources.SourceFunc(func(ctx context.Context, out chan<- []*v1.Pod) error {
		select {
		case out <- []*v1.Pod{pod}:
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	})

	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       "example",
		Sources:        []nodekit.NamedSource{{Name: "mine", Source: src}},
		Runtime:        rt,
		RuntimeManager: podruntime.Options{PodLogsDir: "/tmp/nodekit-example/logs"},
		RootDir:        "/tmp/nodekit-example/root",
		Cgroups:        cgroup.PodManagerOptions{Disabled: true}, // no processes to hold
		OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
			if s.Phase == v1.PodRunning {
				once.Do(func() { fmt.Println(pod.Name, s.Phase); cancel() })
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := agent.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: hello Running
}
