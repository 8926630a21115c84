package eviction

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkSynchronize is one synchronization under memory pressure: the
// stats read, the step, the ranking of every pod and one eviction.
func BenchmarkSynchronize(b *testing.B) {
	for _, n := range []int{110, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := make([]*v1.Pod, n)
			stats := &Stats{
				Memory: &MemoryStats{Available: 50 * mi, Capacity: 64 << 30},
				NodeFs: &FsStats{AvailableBytes: 50 << 30, CapacityBytes: 100 << 30, InodesFree: 1 << 20, Inodes: 2 << 20},
				PIDs:   &PIDStats{Available: 30000, Capacity: 32768},
				Pods:   map[types.UID]PodStats{},
			}
			for i := range pods {
				req := ""
				if i%3 != 0 {
					req = fmt.Sprintf("%dMi", 50+i%100)
				}
				pods[i] = pod(fmt.Sprintf("pod-%d", i), int32(i%4), req, i%3 == 2)
				stats.Pods[pods[i].UID] = PodStats{MemoryWorkingSet: u64(uint64(i%200) * mi), EphemeralStorage: u64(uint64(i) << 20)}
			}
			evictions := 0
			m, err := New(Options{
				Stats:      StatsFunc(func(context.Context) (*Stats, error) { return stats, nil }),
				ActivePods: func() []*v1.Pod { return pods },
				Evict:      func(*v1.Pod, int64, func(*v1.PodStatus)) { evictions++ },
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Synchronize(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if evictions == 0 {
				b.Fatal("no eviction")
			}
		})
	}
}
