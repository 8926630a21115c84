package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/sources"
)

// BenchmarkPodStart measures the time from a snapshot of n pods (one
// container running sleep each, host network, no cgroups) to every pod
// Running, on the process runtime and, in the same run, on containerd 1.6
// and 2.x; and the agent's CPU time per pod (the runtime's own — monitors,
// containerd, shims, runc — is not counted). Pod removal is not timed.
func BenchmarkPodStart(b *testing.B) {
	for _, n := range []int{110, 1000} {
		b.Run(fmt.Sprintf("runtime=process/pods=%d", n), func(b *testing.B) {
			rt, err := process.New(process.Options{StateDir: b.TempDir(), Cgroups: new(bool)})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			benchPodStart(b, n, rt, rt)
		})
		if n > 110 && os.Getenv("NODEKIT_BENCH_CONTAINERD_1000") == "" {
			continue // a thousand runc containers take minutes of CPU
		}
		for _, v := range []struct{ name, env string }{{"containerd-1.6", envEndpoint}, {"containerd-2", envEndpoint2}} {
			b.Run(fmt.Sprintf("runtime=%s/pods=%d", v.name, n), func(b *testing.B) {
				ep := os.Getenv(v.env)
				if ep == "" {
					b.Skipf("%s is not set: no containerd (run hack/test.sh -bench as root)", v.env)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := cri.New(ctx, ep)
				cancel()
				if err != nil {
					b.Fatalf("cri.New(%s): %v", ep, err)
				}
				defer c.Close()
				benchPodStart(b, n, c, c)
			})
		}
	}
}

func benchPodStart(b *testing.B, n int, rs runtime.RuntimeService, is runtime.ImageService) {
	ns := unique("bench")
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns, UID: types.UID(fmt.Sprintf("%s-%d", ns, i))},
			Spec: v1.PodSpec{
				HostNetwork:                   true,
				TerminationGracePeriodSeconds: new(int64(1)),
				Containers: []v1.Container{{
					Name: "main", Image: busyboxImage, ImagePullPolicy: v1.PullIfNotPresent,
					Command: []string{"sh", "-c", sleepScript},
				}},
			},
		}
		sources.SetDefaults(p)
		pods[i] = p
	}
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		src := make(chan []*v1.Pod, 1)
		var mu sync.Mutex
		running := map[string]bool{}
		allRunning := make(chan struct{})
		dir := b.TempDir()
		opts := nodekit.Options{
			NodeName: unique("bench"),
			Sources: []nodekit.NamedSource{{Name: "bench", Source: sources.SourceFunc(func(ctx context.Context, out chan<- []*v1.Pod) error {
				for {
					select {
					case <-ctx.Done():
						return nil
					case p := <-src:
						select {
						case out <- p:
						case <-ctx.Done():
							return nil
						}
					}
				}
			})}},
			Runtime: rs,
			Images:  is,
			RootDir: filepath.Join(dir, "root"),
			Logger:  logr.Discard(),
			OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
				ok := s.Phase == v1.PodRunning && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Running != nil
				mu.Lock()
				defer mu.Unlock()
				if ok && !running[pod.Name] {
					running[pod.Name] = true
					if len(running) == n {
						close(allRunning)
					}
				}
			},
			Node: node.Options{MaxPods: n},
		}
		opts.RuntimeManager.PodLogsDir = filepath.Join(dir, "logs")
		opts.Cgroups.Disabled = true
		agent, err := nodekit.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		before := cpuTime()
		b.StartTimer()
		src <- pods
		select {
		case <-allRunning:
		case <-time.After(30 * time.Minute):
			b.Fatalf("%d pods not all Running after 30 minutes", n)
		}
		b.StopTimer()
		cpu += cpuTime() - before
		// Remove the pods, then stop the agent.
		src <- nil
		deadline := time.Now().Add(10 * time.Minute)
		for {
			cs, err := rs.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{runtime.LabelPodNamespace: ns}})
			sbs, err2 := rs.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runtime.LabelPodNamespace: ns}})
			if err == nil && err2 == nil && len(cs) == 0 && len(sbs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("pods not removed after 10 minutes: %d containers, %d sandboxes left", len(cs), len(sbs))
			}
			time.Sleep(200 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-all-running")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N)/float64(n), "agent-cpu-ms/pod")
}

// cpuTime is the CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
