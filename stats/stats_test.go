package stats

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeRuntime serves pods sandboxes with one container "c" each, 1 s of
// CPU and 1 MiB of working set per container.
type fakeRuntime struct {
	pods         int
	sandboxStats bool
	ts           int64
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	var out []*runtimeapi.PodSandbox
	for i := range f.pods {
		out = append(out, &runtimeapi.PodSandbox{Id: fmt.Sprintf("sb%d", i), CreatedAt: f.ts,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("pod%03d", i), Namespace: "ns", Uid: fmt.Sprintf("uid%d", i)}})
	}
	return out, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var out []*runtimeapi.Container
	for i := range f.pods {
		out = append(out, &runtimeapi.Container{Id: fmt.Sprintf("c%d", i), PodSandboxId: fmt.Sprintf("sb%d", i), CreatedAt: f.ts,
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	return out, nil
}

func (f *fakeRuntime) containerStats(i int) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes:    &runtimeapi.ContainerAttributes{Id: fmt.Sprintf("c%d", i), Metadata: &runtimeapi.ContainerMetadata{Name: "c"}},
		Cpu:           &runtimeapi.CpuUsage{Timestamp: f.ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 1e9}, UsageNanoCores: &runtimeapi.UInt64Value{Value: 1e6}},
		Memory:        &runtimeapi.MemoryUsage{Timestamp: f.ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 1 << 20}, UsageBytes: &runtimeapi.UInt64Value{Value: 2 << 20}},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: f.ts, UsedBytes: &runtimeapi.UInt64Value{Value: 4096}, InodesUsed: &runtimeapi.UInt64Value{Value: 3}},
	}
}

func (f *fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	if !f.sandboxStats {
		return nil, status.Error(codes.Unimplemented, "no")
	}
	var out []*runtimeapi.PodSandboxStats
	for i := range f.pods {
		out = append(out, &runtimeapi.PodSandboxStats{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: fmt.Sprintf("sb%d", i)},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:        &runtimeapi.CpuUsage{Timestamp: f.ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 3e9}},
				Memory:     &runtimeapi.MemoryUsage{Timestamp: f.ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 5 << 20}},
				Network:    &runtimeapi.NetworkUsage{Timestamp: f.ts, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 10}}},
				Process:    &runtimeapi.ProcessUsage{Timestamp: f.ts, ProcessCount: &runtimeapi.UInt64Value{Value: 2}},
				Containers: []*runtimeapi.ContainerStats{f.containerStats(i)},
			},
		})
	}
	return out, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	var out []*runtimeapi.ContainerStats
	for i := range f.pods {
		out = append(out, f.containerStats(i))
	}
	return out, nil
}

// fakeNode is a node whose CPU time grows by 2 core-seconds per call.
type fakeNode struct{ cpu uint64 }

func (n *fakeNode) CPU() (uint64, error) { n.cpu += 2e9; return n.cpu, nil }
func (n *fakeNode) Memory() (uint64, uint64, uint64, error) {
	return 8 << 30, 6 << 30, 5 << 30, nil
}
func (n *fakeNode) Fs() (uint64, uint64, uint64, uint64, uint64, error) {
	return 100 << 30, 40 << 30, 60 << 30, 1000, 400, nil
}
func (n *fakeNode) BootTime() (time.Time, error) { return time.Unix(1000, 0), nil }

func TestSummary(t *testing.T) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, sandboxStats := range []bool{true, false} {
		t.Run(fmt.Sprintf("sandbox stats %v", sandboxStats), func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(ts)
			p, err := New(Options{NodeName: "n", Runtime: &fakeRuntime{pods: 2, sandboxStats: sandboxStats, ts: ts.UnixNano()}, Node: &fakeNode{}, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			s1, err := p.Summary(t.Context(), false)
			if err != nil {
				t.Fatal(err)
			}
			if s1.Node.CPU.UsageNanoCores != nil {
				t.Errorf("usageNanoCores from one sample: %d", *s1.Node.CPU.UsageNanoCores)
			}
			clk.SetTime(ts.Add(4 * time.Second))
			s, err := p.Summary(t.Context(), false)
			if err != nil {
				t.Fatal(err)
			}
			// 2 core-seconds in 4 s: half a core.
			if got := *s.Node.CPU.UsageNanoCores; got != 5e8 {
				t.Errorf("node usageNanoCores %d, want 5e8", got)
			}
			if got := *s.Node.Memory.WorkingSetBytes; got != 2<<30 {
				t.Errorf("node working set %d, want 2 GiB", got)
			}
			if got := *s.Node.Fs.InodesUsed; got != 600 {
				t.Errorf("node inodes used %d", got)
			}
			if len(s.Pods) != 2 || s.Pods[0].PodRef != (statsapi.PodReference{Name: "pod000", Namespace: "ns", UID: "uid0"}) {
				t.Fatalf("pods %+v", s.Pods)
			}
			pod := s.Pods[0]
			wantCPU, wantMem := uint64(1e9), uint64(1<<20)
			if sandboxStats {
				wantCPU, wantMem = 3e9, 5<<20
				if pod.Network == nil || *pod.Network.RxBytes != 10 || pod.ProcessStats == nil || *pod.ProcessStats.ProcessCount != 2 {
					t.Errorf("pod network %+v process %+v", pod.Network, pod.ProcessStats)
				}
			}
			if *pod.CPU.UsageCoreNanoSeconds != wantCPU || *pod.Memory.WorkingSetBytes != wantMem {
				t.Errorf("pod cpu %d memory %d, want %d %d", *pod.CPU.UsageCoreNanoSeconds, *pod.Memory.WorkingSetBytes, wantCPU, wantMem)
			}
			if len(pod.Containers) != 1 || pod.Containers[0].Name != "c" || *pod.Containers[0].Rootfs.UsedBytes != 4096 || *pod.EphemeralStorage.UsedBytes != 4096 {
				t.Errorf("containers %+v", pod.Containers)
			}
			only, err := p.Summary(t.Context(), true)
			if err != nil {
				t.Fatal(err)
			}
			if only.Node.Fs != nil || only.Pods[0].Containers[0].Rootfs != nil || only.Pods[0].Network != nil || only.Pods[0].CPU == nil {
				t.Errorf("only CPU and memory: %+v", only.Pods[0])
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	cpu, err := parseProcStatCPU([]byte("cpu  100 5 50 1000 7 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"))
	if err != nil || cpu != (100+5+50+3+2+1)*1e7 {
		t.Errorf("cpu %d, %v", cpu, err)
	}
	if _, err := parseProcStatCPU([]byte("intr 1\n")); err == nil {
		t.Error("no cpu line: no error")
	}
	total, avail, free, err := parseMeminfo(strings.NewReader("MemTotal:       16 kB\nMemFree:        4 kB\nMemAvailable:   8 kB\nBuffers: 1 kB\n"))
	if diff := cmp.Diff([]uint64{16384, 8192, 4096}, []uint64{total, avail, free}); diff != "" || err != nil {
		t.Errorf("meminfo (-want +got) %v:\n%s", err, diff)
	}
	if _, _, _, err := parseMeminfo(strings.NewReader("MemTotal: x kB\n")); err == nil {
		t.Error("bad meminfo: no error")
	}
}

func TestHostNode(t *testing.T) {
	var h HostNode
	if _, err := h.CPU(); err != nil {
		t.Skipf("no /proc/stat: %v", err)
	}
	if total, avail, _, err := h.Memory(); err != nil || total == 0 || avail > total {
		t.Errorf("memory %d %d %v", total, avail, err)
	}
	if c, _, _, _, _, err := h.Fs(); err != nil || c == 0 {
		t.Errorf("fs %d %v", c, err)
	}
	if b, err := h.BootTime(); err != nil || b.After(time.Now()) {
		t.Errorf("boot time %v %v", b, err)
	}
}

// BenchmarkSummary110Pods is a full summary of a node at the kubelet's
// default 110 pods, from a runtime answering at once.
func BenchmarkSummary110Pods(b *testing.B) {
	for _, sandboxStats := range []bool{true, false} {
		b.Run(fmt.Sprintf("sandboxStats=%v", sandboxStats), func(b *testing.B) {
			p, err := New(Options{NodeName: "n", Runtime: &fakeRuntime{pods: 110, sandboxStats: sandboxStats, ts: 1}, Node: &fakeNode{}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Summary(b.Context(), false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
