package runtimetest

import (
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func benchRuntime(b *testing.B, pods int) *Runtime {
	b.Helper()
	r := New(Options{Images: []string{"busybox"}})
	b.Cleanup(r.Close)
	ctx := b.Context()
	for i := range pods {
		uid := fmt.Sprint(i)
		sc := sandboxConfig(uid, uid)
		sid, err := r.RunPodSandbox(ctx, sc, "")
		if err != nil {
			b.Fatal(err)
		}
		id, err := r.CreateContainer(ctx, sid, containerConfig("c"), sc)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// BenchmarkList measures what a PLEG relist asks of the runtime: list
// every sandbox and every container.
func BenchmarkList(b *testing.B) {
	for _, pods := range []int{110, 1000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			r := benchRuntime(b, pods)
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				s, err := r.ListPodSandbox(ctx, nil)
				if err != nil || len(s) != pods {
					b.Fatal(len(s), err)
				}
				c, err := r.ListContainers(ctx, nil)
				if err != nil || len(c) != pods {
					b.Fatal(len(c), err)
				}
			}
		})
	}
}

// BenchmarkListBySandbox measures the per-pod query of a status read.
func BenchmarkListBySandbox(b *testing.B) {
	r := benchRuntime(b, 1000)
	ctx := b.Context()
	sandboxes, _ := r.ListPodSandbox(ctx, nil)
	filter := &runtimeapi.ContainerFilter{PodSandboxId: sandboxes[500].Id}
	b.ReportAllocs()
	for b.Loop() {
		if c, err := r.ListContainers(ctx, filter); err != nil || len(c) != 1 {
			b.Fatal(len(c), err)
		}
	}
}

// BenchmarkPodLifecycle measures running a pod through the runtime and
// removing it.
func BenchmarkPodLifecycle(b *testing.B) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	ctx := b.Context()
	sc := sandboxConfig("p", "u")
	cc := containerConfig("c", "sh", "-c", "sleep 3600")
	b.ReportAllocs()
	for b.Loop() {
		sid, err := r.RunPodSandbox(ctx, sc, "")
		if err != nil {
			b.Fatal(err)
		}
		id, err := r.CreateContainer(ctx, sid, cc, sc)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := r.StopPodSandbox(ctx, sid); err != nil {
			b.Fatal(err)
		}
		if err := r.RemovePodSandbox(ctx, sid); err != nil {
			b.Fatal(err)
		}
	}
}
