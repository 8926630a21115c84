package stats

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

const mib = 1 << 20

// TestNodeMemoryAsKubelet: the node's working set is the root memory
// cgroup's usage less its inactive file pages (cgroup v1), or MemTotal −
// MemFree less Inactive(file) where the root cgroup has no usage file
// (cgroup v2), not MemTotal − MemAvailable; available is total less the
// working set.
func TestNodeMemoryAsKubelet(t *testing.T) {
	meminfo := "MemTotal: 2048000 kB\nMemFree: 102400 kB\nMemAvailable: 1536000 kB\nInactive(file): 409600 kB\n"
	for _, tc := range []struct {
		name          string
		v1            bool
		usage, wantWS uint64
		wantAvail     uint64
	}{
		{name: "cgroup v1 root", v1: true, usage: 1000 * mib, wantWS: 700 * mib, wantAvail: 2000*mib - 700*mib},
		{name: "cgroup v2 root", usage: 1900 * mib, wantWS: 1500 * mib, wantAvail: 500 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup")
			writeFile(t, filepath.Join(proc, "meminfo"), meminfo)
			writeFile(t, filepath.Join(cg, "unified", "cgroup.procs"), "1\n")
			if tc.v1 {
				writeFile(t, filepath.Join(cg, "memory", "memory.usage_in_bytes"), "1048576000\n")
				writeFile(t, filepath.Join(cg, "memory", "memory.stat"), "cache 1\ninactive_file 5\ntotal_inactive_file 314572800\n")
			}
			p, err := New(Options{NodeName: "n", Runtime: &fakeRuntime{}, Node: HostNode{Proc: proc, Cgroup: cg}})
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Summary(t.Context(), true)
			if err != nil {
				t.Fatal(err)
			}
			m := s.Node.Memory
			if m == nil || *m.WorkingSetBytes != tc.wantWS || *m.UsageBytes != tc.usage || *m.AvailableBytes != tc.wantAvail {
				t.Fatalf("node memory %s, want working set %d usage %d available %d", fmtMem(m), tc.wantWS, tc.usage, tc.wantAvail)
			}
		})
	}
}

func fmtMem(m *statsapi.MemoryStats) string {
	if m == nil || m.WorkingSetBytes == nil || m.UsageBytes == nil || m.AvailableBytes == nil {
		return fmt.Sprintf("%+v", m)
	}
	return fmt.Sprintf("working set %d usage %d available %d", *m.WorkingSetBytes, *m.UsageBytes, *m.AvailableBytes)
}

// TestNodeRlimit: the node reports its process limit and count, as the
// kubelet's rlimit.
func TestNodeRlimit(t *testing.T) {
	proc := t.TempDir()
	writeFile(t, filepath.Join(proc, "sys", "kernel", "pid_max"), "4194304\n")
	p, err := New(Options{NodeName: "n", Runtime: &fakeRuntime{}, Node: HostNode{Proc: proc}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Node.Rlimit
	if r == nil || r.MaxPID == nil || *r.MaxPID != 4194304 || r.NumOfRunningProcesses == nil || *r.NumOfRunningProcesses <= 0 || r.Time.IsZero() {
		t.Fatalf("node rlimit %+v, want maxpid 4194304 and the running processes", r)
	}
}

// restartingRuntime has one pod whose container "c" exited twice and is
// in its restart back-off, and whose container "d" restarted and runs.
type restartingRuntime struct{ noStatsRuntime }

func (restartingRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return []*runtimeapi.PodSandbox{{Id: "sb", CreatedAt: 1, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}}, nil
}

func (restartingRuntime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	all := []*runtimeapi.Container{
		{Id: "c0", PodSandboxId: "sb", CreatedAt: 10, Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: 0}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
		{Id: "c1", PodSandboxId: "sb", CreatedAt: 20, Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: 1}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
		{Id: "d0", PodSandboxId: "sb", CreatedAt: 10, Metadata: &runtimeapi.ContainerMetadata{Name: "d", Attempt: 0}, State: runtimeapi.ContainerState_CONTAINER_EXITED},
		{Id: "d1", PodSandboxId: "sb", CreatedAt: 30, Metadata: &runtimeapi.ContainerMetadata{Name: "d", Attempt: 1}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}
	var out []*runtimeapi.Container
	for _, c := range all {
		if f.GetState() == nil || f.GetState().GetState() == c.GetState() {
			out = append(out, c)
		}
	}
	return out, nil
}

// TestRestartingPodContainers: a pod whose container is in its restart
// back-off still lists it (its newest instance), as the kubelet does, and
// a restarted container is listed once, its running instance.
func TestRestartingPodContainers(t *testing.T) {
	p, err := New(Options{NodeName: "n", Runtime: restartingRuntime{}, Node: &fakeNode{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 {
		t.Fatalf("pods %+v", s.Pods)
	}
	var got []string
	for _, c := range s.Pods[0].Containers {
		got = append(got, fmt.Sprintf("%s@%d", c.Name, c.StartTime.UnixNano()))
	}
	if want := []string{"c@20", "d@30"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("containers %q, want %q", got, want)
	}
}

// zeroNetworkTime is a runtime whose sandbox stats give the network
// figures no timestamp, as containerd does.
type zeroNetworkTime struct{ fakeRuntime }

func (f *zeroNetworkTime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	list, err := f.fakeRuntime.ListPodSandboxStats(ctx, filter)
	for _, s := range list {
		s.GetLinux().GetNetwork().Timestamp = 0
	}
	return list, err
}

// TestNetworkTime: a pod's network figures without a timestamp from the
// runtime are stamped with the summary's time, never 1970-01-01.
func TestNetworkTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := New(Options{NodeName: "n", Runtime: &zeroNetworkTime{fakeRuntime{pods: 1, sandboxStats: true, ts: now.UnixNano()}},
		Node: &fakeNode{}, Clock: clocktesting.NewFakePassiveClock(now.Add(time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Pods[0].Network; n == nil || !n.Time.Time.Equal(now.Add(time.Second)) {
		t.Fatalf("pod network %+v, want the time %v", n, now.Add(time.Second))
	}
}

// TestSystemContainersAndImageFs: the node lists its system containers
// (the agent's own cgroup as "kubelet", the pods' as "pods") with their
// CPU and memory read from their cgroups, and its image file system as
// runtime.imageFs and runtime.containerFs.
func TestSystemContainersAndImageFs(t *testing.T) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(ts)
	root := cgrouptest.V2(t)
	mgr, err := cgroup.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, usec := range map[string]string{"agent": "1000000", "kubepods": "3000000"} {
		if err := mgr.Create("/"+name, nil); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, name, "memory.current"), "4194304")
		writeFile(t, filepath.Join(root, name, "memory.stat"), "inactive_file 1048576\n")
		writeFile(t, filepath.Join(root, name, "cpu.stat"), "usage_usec "+usec+"\n")
	}
	imageFs := &statsapi.FsStats{UsedBytes: u64(1 << 30), CapacityBytes: u64(10 << 30)}
	p, err := New(Options{NodeName: "n", Runtime: &fakeRuntime{}, Node: &fakeNode{}, Clock: clk, Cgroups: mgr,
		SystemContainers: map[string]string{statsapi.SystemContainerKubelet: "/agent", statsapi.SystemContainerPods: "/kubepods", "gone": "/absent"},
		ImageFs:          func(context.Context) (*statsapi.FsStats, error) { return imageFs, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Node.SystemContainers {
		got = append(got, fmt.Sprintf("%s cpu=%d ws=%d", c.Name, *c.CPU.UsageCoreNanoSeconds, *c.Memory.WorkingSetBytes))
	}
	want := []string{"kubelet cpu=1000000000 ws=3145728", "pods cpu=3000000000 ws=3145728"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("system containers %q, want %q", got, want)
	}
	if r := s.Node.Runtime; r == nil || r.ImageFs == nil || *r.ImageFs.UsedBytes != 1<<30 || r.ContainerFs == nil || *r.ContainerFs.CapacityBytes != 10<<30 {
		t.Errorf("node runtime %+v, want the image file system", r)
	}
	// The CPU rate from two samples.
	clk.SetTime(ts.Add(2 * time.Second))
	writeFile(t, filepath.Join(root, "agent", "cpu.stat"), "usage_usec 2000000\n")
	if s, err = p.Summary(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if c := s.Node.SystemContainers[0]; c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 5e8 {
		t.Errorf("kubelet usageNanoCores %v, want 5e8", c.CPU.UsageNanoCores)
	}
}
