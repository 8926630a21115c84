package process_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/process"
)

// BenchmarkRecovery measures what a restarted agent waits for before it
// knows its containers again: a new process runtime on the state of n
// running containers (each a process and its monitor) reads its records,
// checks every process, and answers a list of the running containers and
// the status of each.
func BenchmarkRecovery(b *testing.B) {
	for _, n := range []int{110, 1000} {
		b.Run("containers="+strconv.Itoa(n), func(b *testing.B) { benchRecovery(b, n) })
	}
}

func benchRecovery(b *testing.B, n int) {
	dir := b.TempDir()
	ctx := context.Background()
	rt, err := process.New(process.Options{StateDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	var sandboxes []string
	for i := range n {
		cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("p%d", i), Namespace: "bench", Uid: fmt.Sprintf("uid-%d", i)}}
		sb, err := rt.RunPodSandbox(ctx, cfg, "")
		if err != nil {
			b.Fatal(err)
		}
		sandboxes = append(sandboxes, sb)
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
			Command: []string{"sleep", "3600"},
		}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	rt.Close()
	b.Cleanup(func() {
		rt, err := process.New(process.Options{StateDir: dir})
		if err != nil {
			b.Error(err)
			return
		}
		defer rt.Close()
		for _, sb := range sandboxes {
			if err := rt.RemovePodSandbox(ctx, sb); err != nil {
				b.Error(err)
			}
		}
	})
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	b.ResetTimer()
	for b.Loop() {
		rt, err := process.New(process.Options{StateDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		list, err := rt.ListContainers(ctx, running)
		if err != nil || len(list) != n {
			b.Fatalf("ListContainers: %d running, %v; want %d", len(list), err, n)
		}
		for _, c := range list {
			if _, err := rt.ContainerStatus(ctx, c.Id, false); err != nil {
				b.Fatal(err)
			}
		}
		rt.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/container")
}
