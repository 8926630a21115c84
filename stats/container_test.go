package stats

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

// noStatsRuntime serves sandboxes and containers but no stats at all.
type noStatsRuntime struct{ fakeRuntime }

func (noStatsRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, status.Error(codes.Unimplemented, "no")
}

func (noStatsRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, status.Error(codes.Unimplemented, "no")
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestContainerFigures: a runtime without stats gives the containers' CPU
// and memory from their cgroups (usageNanoCores from two samples), and the
// logs and volume directories are measured into the containers' logs, the
// pod's volume stats and its ephemeral storage, reused for
// DiskUsagePeriod.
func TestContainerFigures(t *testing.T) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(ts)
	root := cgrouptest.V2(t)
	mgr, err := cgroup.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Create("/kubepods/poduid0/c0", nil); err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(root, "kubepods/poduid0/c0")
	writeFile(t, filepath.Join(cg, "memory.current"), "3145728")
	writeFile(t, filepath.Join(cg, "memory.stat"), "inactive_file 1048576\n")
	writeFile(t, filepath.Join(cg, "cpu.stat"), "usage_usec 2000000\n")

	dirs := t.TempDir()
	logDir := filepath.Join(dirs, "logs", "c")
	volDir := filepath.Join(dirs, "volumes", "scratch")
	writeFile(t, filepath.Join(logDir, "0.log"), strings.Repeat("x", 8192))
	writeFile(t, filepath.Join(volDir, "data"), strings.Repeat("y", 64<<10))

	p, err := New(Options{
		NodeName: "n", Runtime: &noStatsRuntime{fakeRuntime{pods: 1, ts: ts.UnixNano()}}, Node: &fakeNode{}, Clock: clk,
		Cgroups: mgr,
		ContainerCgroup: func(pod statsapi.PodReference, id string) string {
			return "/kubepods/pod" + pod.UID + "/" + id
		},
		ContainerLogDir: func(pod statsapi.PodReference, c string) string { return filepath.Join(dirs, "logs", c) },
		PodVolumes: func(pod statsapi.PodReference) map[string]string {
			return map[string]string{"scratch": volDir, "gone": filepath.Join(dirs, "absent")}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Pods[0].Containers[0]
	if *c.Memory.WorkingSetBytes != 2<<20 || *c.Memory.UsageBytes != 3<<20 || *c.CPU.UsageCoreNanoSeconds != 2e9 || c.CPU.UsageNanoCores != nil {
		t.Errorf("container memory %+v cpu %+v", c.Memory, c.CPU)
	}
	if *s.Pods[0].Memory.WorkingSetBytes != 2<<20 {
		t.Errorf("pod working set %d, want the container's", *s.Pods[0].Memory.WorkingSetBytes)
	}
	logs, vol := *c.Logs.UsedBytes, uint64(0)
	if logs < 8192 {
		t.Errorf("logs %d bytes, want at least 8192", logs)
	}
	vs := s.Pods[0].VolumeStats
	if len(vs) != 1 || vs[0].Name != "scratch" {
		t.Fatalf("volume stats %+v, want scratch alone", vs)
	}
	vol = *vs[0].UsedBytes
	if vol < 64<<10 {
		t.Errorf("volume %d bytes, want at least 64Ki", vol)
	}
	if got := *s.Pods[0].EphemeralStorage.UsedBytes; got != logs+vol {
		t.Errorf("ephemeral storage %d, want logs %d + volume %d", got, logs, vol)
	}

	// Five seconds later, one more core-second: 0.2 core. The volume grew,
	// but its size is reused until the period passed.
	writeFile(t, filepath.Join(cg, "cpu.stat"), "usage_usec 3000000\n")
	writeFile(t, filepath.Join(volDir, "more"), strings.Repeat("z", 64<<10))
	clk.SetTime(ts.Add(5 * time.Second))
	s, err = p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	c = s.Pods[0].Containers[0]
	if c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 2e8 {
		t.Errorf("usageNanoCores %v, want 2e8 (1 core-second in 5s)", c.CPU.UsageNanoCores)
	}
	if got := *s.Pods[0].VolumeStats[0].UsedBytes; got != vol {
		t.Errorf("volume measured again within the period: %d, was %d", got, vol)
	}
	clk.SetTime(ts.Add(20 * time.Second))
	s, err = p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := *s.Pods[0].VolumeStats[0].UsedBytes; got < vol+64<<10 {
		t.Errorf("volume after the period: %d, want at least %d", got, vol+64<<10)
	}
}

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a", "f"), strings.Repeat("x", 10000))
	if err := os.Link(filepath.Join(dir, "a", "f"), filepath.Join(dir, "a", "hardlink")); err != nil {
		t.Fatal(err)
	}
	b, n, err := DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	// dir, a, f (the link counted once).
	if diff := cmp.Diff([]uint64{3}, []uint64{n}); diff != "" || b < 10000 || b > 10000+3*64<<10 {
		t.Errorf("DiskUsage = %d bytes, %d inodes", b, n)
	}
	if _, _, err := DiskUsage(filepath.Join(dir, "absent")); err == nil {
		t.Error("DiskUsage of a missing directory gave no error")
	}
}
