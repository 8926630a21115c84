package podworker

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// benchSync counts SyncPod calls; every pod syncs once and settles.
type benchSync struct{ synced sync.WaitGroup }

func (s *benchSync) SyncPod(context.Context, UpdateType, *v1.Pod, *runtime.PodStatus) (bool, error) {
	s.synced.Done()
	return false, nil
}
func (s *benchSync) SyncTerminatingPod(context.Context, *v1.Pod, *runtime.PodStatus, int64, func(*v1.PodStatus)) error {
	return nil
}
func (s *benchSync) SyncTerminatingRuntimePod(context.Context, *runtime.Pod) error { return nil }
func (s *benchSync) SyncTerminatedPod(context.Context, *v1.Pod, *runtime.PodStatus) error {
	return nil
}

// benchCache answers every pod with one shared status.
type benchCache struct {
	pleg.Cache
	status *runtime.PodStatus
}

func (c *benchCache) Get(types.UID) (*runtime.PodStatus, error) { return c.status, nil }
func (c *benchCache) GetNewerThan(context.Context, types.UID, time.Time) (*runtime.PodStatus, error) {
	return c.status, nil
}

// BenchmarkSettledPodHeap reports the live heap the workers and the queue
// hold for each running pod once every pod synced and its goroutine
// exited (heap-B/pod); the pod objects themselves are not counted.
func BenchmarkSettledPodHeap(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := make([]*v1.Pod, n)
			for i := range pods {
				pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{
					Namespace: "default",
					Name:      fmt.Sprintf("web-7fb96c846b-%05d", i),
					UID:       types.UID(fmt.Sprintf("%08d-1b2c-4d5e-8f90-a1b2c3d4e5f6", i)),
				}}
			}
			// A first round outside the measure: the runtime keeps the
			// goroutine descriptors of exited goroutines for reuse.
			settlePods(b, pods)
			var perPod float64
			for b.Loop() {
				var before, after goruntime.MemStats
				goruntime.GC()
				goruntime.ReadMemStats(&before)
				w, queue := settlePods(b, pods)
				goruntime.GC()
				goruntime.ReadMemStats(&after)
				perPod = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
				if w.IsPodKnownTerminated(pods[0].UID) || !w.CouldHaveRunningContainers(pods[n-1].UID) {
					b.Fatal("a settled pod is not running")
				}
				goruntime.KeepAlive(queue)
			}
			b.ReportMetric(perPod, "heap-B/pod")
		})
	}
}

// settlePods creates a worker for every pod, lets each sync once, and
// returns once every worker goroutine exited.
func settlePods(b *testing.B, pods []*v1.Pod) (*Workers, *Queue) {
	fs := &benchSync{}
	queue := NewQueue()
	w, err := New(fs, Options{Cache: &benchCache{status: &runtime.PodStatus{}}, Queue: queue})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	fs.synced.Add(len(pods))
	for _, p := range pods {
		w.UpdatePod(UpdateOptions{UpdateType: SyncPodCreate, Pod: p})
	}
	fs.synced.Wait()
	// Run returns once every worker goroutine exited, each after
	// queueing its pod's resync: what stays is what a settled pod holds.
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return w, queue
}
