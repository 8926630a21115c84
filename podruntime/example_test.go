package podruntime_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	nkstatus "github.com/nodekit/nodekit/status"
)

func ExampleNew() {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"nginx:1.25"}})
	defer rt.Close()
	logs, _ := os.MkdirTemp("", "pods")
	defer os.RemoveAll(logs)

	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: logs})
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "nginx", Image: "nginx:1.25", ImagePullPolicy: v1.PullIfNotPresent}},
		},
	}
	status, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err := m.SyncPod(ctx, pod, status).Err(); err != nil {
		fmt.Println(err)
		return
	}
	status, _ = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	api := nkstatus.Generate(nkstatus.Input{Pod: pod, Runtime: status, RuntimeName: m.RuntimeName(), Waiting: m})
	fmt.Println(api.Phase, api.ContainerStatuses[0].Ready)
	// Output: Running true
}
