package runtimetest_test

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func ExampleNew() {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()

	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "1234"},
	}
	sandboxID, _ := rt.RunPodSandbox(ctx, sandboxConfig, "")
	id, _ := rt.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  []string{"sh", "-c", "echo hello; sleep 0.01; exit 3"},
	}, sandboxConfig)
	_ = rt.StartContainer(ctx, id)

	time.Sleep(50 * time.Millisecond) // in tests, prefer testing/synctest
	resp, _ := rt.ContainerStatus(ctx, id, false)
	fmt.Println(resp.Status.State, resp.Status.ExitCode, resp.Status.Reason)
	fmt.Println(rt.Sandboxes()[0].IP)
	fmt.Println(rt.Calls("StartContainer"))
	// Output:
	// CONTAINER_EXITED 3 Error
	// 10.88.0.2
	// 1
}
