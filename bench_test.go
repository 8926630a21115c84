package nodekit_test

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// BenchmarkStartPods delivers N static pods at once to an agent on the
// in-memory runtime (no artificial latency) and measures until every pod's
// status is Running. Reported per pod: CPU time (user+system), allocations,
// bytes allocated and live heap.
//
// The PLEG follows the in-memory runtime's event stream by default
// (pleg=evented); pleg=generic relists every second instead.
//
// The pod and log directories are on /dev/shm when it is a tmpfs: on this
// kind of machine's ext4 disk, creating them (four directories a pod) takes
// most of the CPU and hides the agent's own cost.
func BenchmarkStartPods(b *testing.B) {
	for _, mode := range []string{"evented", "generic"} {
		for _, n := range []int{110, 1000} {
			b.Run(fmt.Sprintf("pleg=%s/pods=%d", mode, n), func(b *testing.B) { benchmarkStartPods(b, n, mode == "generic", 0) })
		}
	}
}

// BenchmarkIdle is the agent's CPU once its pods run and nothing changes:
// it starts the pods as BenchmarkStartPods does, lets the agent settle for
// 3s, then reports the CPU time it spends over the next 10s as a
// percentage of one core (idle-cpu-%). The work that remains is periodic:
// the sync loop's tick and housekeeping, the PLEG (the evented PLEG's
// cache tick, or a relist every second), the pods' resyncs (every minute,
// jittered) and the status manager's resync.
func BenchmarkIdle(b *testing.B) {
	for _, mode := range []string{"evented", "generic"} {
		for _, n := range []int{110, 1000} {
			b.Run(fmt.Sprintf("pleg=%s/pods=%d", mode, n), func(b *testing.B) { benchmarkStartPods(b, n, mode == "generic", 10*time.Second) })
		}
	}
}

// benchmarkStartPods starts n pods; with idle set, it then measures the
// CPU of the agent over idle after 3s of settling.
func benchmarkStartPods(b *testing.B, n int, generic bool, idle time.Duration) {
	pods := benchPods(n)
	var cpu, idleCPU time.Duration
	var heapBytes uint64
	var mallocs, allocBytes uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		var running atomic.Int64
		allRunning := make(chan struct{})
		seen := make(map[types.UID]bool, n)
		src := make(chanSource, 1)
		agent, err := nodekit.New(nodekit.Options{
			NodeName:       "bench",
			Sources:        []nodekit.NamedSource{{Name: "bench", Source: src}},
			Runtime:        rt,
			RuntimeManager: podruntime.Options{PodLogsDir: shmDir(b, "logs")},
			RootDir:        shmDir(b, "root"),
			Cgroups:        cgroup.PodManagerOptions{Disabled: true},
			PLEG:           newPLEG(generic),
			OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
				// Called serially for each pod; seen is only touched here.
				if s.Phase == v1.PodRunning && !seen[pod.UID] {
					seen[pod.UID] = true
					if running.Add(1) == int64(n) {
						close(allRunning)
					}
				}
			},
			Node: node.Options{MaxPods: n},
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		// Let the agent start (first relist, sources) before timing.
		time.Sleep(50 * time.Millisecond)
		goruntime.GC()
		var ms0, ms1 goruntime.MemStats
		goruntime.ReadMemStats(&ms0)
		ru0 := rusage()
		b.StartTimer()

		src <- pods
		<-allRunning

		b.StopTimer()
		ru1 := rusage()
		goruntime.ReadMemStats(&ms1)
		if idle > 0 {
			time.Sleep(3 * time.Second)
			stopProfile := idleProfile(b)
			i0 := rusage()
			time.Sleep(idle)
			idleCPU += rusage() - i0
			stopProfile()
		}
		mallocs += ms1.Mallocs - ms0.Mallocs
		allocBytes += ms1.TotalAlloc - ms0.TotalAlloc
		cpu += ru1 - ru0
		goruntime.GC()
		var ms2 goruntime.MemStats
		goruntime.ReadMemStats(&ms2)
		heapBytes += ms2.HeapAlloc - min(ms2.HeapAlloc, ms0.HeapAlloc)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		rt.Close()
		if testing.Verbose() {
			b.Logf("goroutines after the agent stopped: %d", goruntime.NumGoroutine())
		}
		b.StartTimer()
	}
	b.StopTimer()
	per := float64(b.N * n)
	if idle > 0 {
		b.ReportMetric(100*float64(idleCPU)/float64(time.Duration(b.N)*idle), "idle-cpu-%")
		return
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/per, "cpu-ns/pod")
	b.ReportMetric(float64(mallocs)/per, "allocs/pod")
	b.ReportMetric(float64(allocBytes)/per, "B/pod")
	b.ReportMetric(float64(heapBytes)/per, "live-B/pod")
}

// benchPods returns n static pods of one busybox container each.
func benchPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: v1.PodSpec{Containers: []v1.Container{{
				Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"},
			}}},
		}
		sources.SetDefaults(p)
		pods[i] = p
	}
	return pods
}

// rusage returns the process's CPU time so far (user + system).
func rusage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// shmDir returns a fresh directory on /dev/shm when it is a tmpfs (so that
// the benchmark measures the agent, not the machine's disk), else a temp
// directory.
func shmDir(b *testing.B, name string) string {
	if dir, err := os.MkdirTemp("/dev/shm", "nodekit-bench-"+name); err == nil {
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// newPLEG gives the agent a relisting PLEG when generic is true, and the
// default (nil: pleg.NewAuto) otherwise.
func newPLEG(generic bool) func(runtime.RuntimeService, pleg.StatusGetter, pleg.Cache, logr.Logger) (pleg.EventGenerator, error) {
	if !generic {
		return nil
	}
	return func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
		return pleg.NewGeneric(rt, st, c, pleg.GenericOptions{Logger: log})
	}
}
