//go:build linux

package eviction

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// testMemoryCgroup makes a cgroup v1 memory cgroup of the test's own, or
// skips when the host has none or the test is not root.
func testMemoryCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a memory cgroup needs root")
	}
	root := "/sys/fs/cgroup/memory"
	if err := notifierSupported(root); err != nil {
		t.Skipf("no cgroup v1 memory controller: %v", err)
	}
	cg := filepath.Join(root, fmt.Sprintf("nodekit-notifier-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg); err != nil {
			t.Errorf("removing the test cgroup: %v", err)
		}
	})
	return cg
}

// chargeMemory writes n MiB to a tmpfs file from a process in cgroup cg
// (tmpfs pages are charged to the writer's cgroup) and returns the
// function that removes the file (uncharging them).
func chargeMemory(t *testing.T, cg string, n int) (free func()) {
	t.Helper()
	shm := filepath.Join("/dev/shm", filepath.Base(cg)+"-charge")
	free = func() { os.Remove(shm) }
	t.Cleanup(free)
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && exec dd if=/dev/zero of=%s bs=1M count=%d 2>/dev/null", cg, shm, n)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("charging memory: %v: %s", err, out)
	}
	return free
}

func cgroupUsage(t *testing.T, cg string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMemoryThresholdNotifier: with the notification armed 4MiB above the
// cgroup's usage, charging 8MiB wakes the manager at once: a second
// synchronization comes long before the (hour-long) interval.
func TestMemoryThresholdNotifier(t *testing.T) {
	cg := testMemoryCgroup(t)
	base := cgroupUsage(t, cg)
	threshold := resource.MustParse("100Mi")
	capacity := uint64(base + 4<<20 + threshold.Value())
	synced := make(chan struct{}, 10)
	m, err := New(Options{
		Thresholds: []Threshold{{Signal: SignalMemoryAvailable, Value: Value{Quantity: &threshold}}},
		Stats: StatsFunc(func(context.Context) (*Stats, error) {
			synced <- struct{}{}
			// Plenty available: no pressure, only the notification counts.
			return &Stats{Memory: &MemoryStats{Capacity: capacity, Available: capacity}}, nil
		}),
		ActivePods:         func() []*v1.Pod { return nil },
		Evict:              func(*v1.Pod, int64, func(*v1.PodStatus)) {},
		MonitoringInterval: time.Hour,
		MemoryCgroup:       cg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	<-synced // the first synchronization; the notification is armed after it
	// The kernel signals every crossing, up or down: charge and free until
	// a synchronization comes (the first charge may precede the arming).
	deadline := time.After(30 * time.Second)
	for i := 0; ; i++ {
		free := chargeMemory(t, cg, 8)
		select {
		case <-synced:
			t.Logf("usage %d → %d crossed the threshold at %d (charge %d): synchronized at once", base, cgroupUsage(t, cg), capacity-uint64(threshold.Value()), i+1)
			free()
			return
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("no synchronization within 30s of crossing the threshold (usage %d, threshold %d)", cgroupUsage(t, cg), capacity-uint64(threshold.Value()))
		}
		free()
	}
}
