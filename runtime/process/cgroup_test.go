package process_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/metrics"
	"github.com/nodekit/nodekit/runtime/backend"
	"github.com/nodekit/nodekit/stats"
)

// podCgroup makes a pod cgroup for the test under a parent of its own,
// removed at the end, or skips the test without root or cgroups.
func podCgroup(t *testing.T) (cgroup.Manager, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the process runtime puts containers in cgroups only as root")
	}
	cg, err := cgroup.Open("")
	if err != nil {
		t.Skipf("no cgroup file system: %v", err)
	}
	name := "/nodekit-process-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/pod1"
	if err := cg.Create(name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cg.Destroy(ctx, "/"+splitFirst(name)); err != nil {
			t.Errorf("destroy the test's cgroups: %v", err)
		}
	})
	return cg, name
}

func splitFirst(name string) string {
	for i := 1; i < len(name); i++ {
		if name[i] == '/' {
			return name[1:i]
		}
	}
	return name[1:]
}

// TestContainerCgroup: as root, each container runs in a cgroup of its own
// below its pod's (<pod cgroup>/<container ID>), whose CPU and memory the
// summary reads, so that /stats/summary and /metrics/resource carry the
// container's and the pod's CPU and memory; the cgroup goes when the
// container ends; the monitor is not counted in it.
func TestContainerCgroup(t *testing.T) {
	cg, parent := podCgroup(t)
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	t.Cleanup(func() { rt.Close() })
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-cgroup"},
		LogDirectory: t.TempDir(),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent},
	}
	sb, err := rt.RunPodSandbox(t.Context(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemovePodSandbox(context.Background(), sb) })
	// Some CPU and memory, then sleep.
	id := container(t, rt, sb, cfg, "", "sh", "-c", `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; x=$(head -c 4000000 /dev/zero | tr '\0' a); exec sleep 3600`)
	if err := rt.StartContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	pid, monitor := processInfo(t, dir, id)
	name := parent + "/" + id
	eventually(t, "the container's process in its own cgroup", func() bool {
		pids, _ := cg.Pids(name)
		return slices.Contains(pids, pid)
	})
	if pids, _ := cg.Pids(name); slices.Contains(pids, monitor) {
		t.Errorf("the monitor %d is in the container's cgroup %s: %v", monitor, name, pids)
	}
	if pids, _ := cg.Pids(parent); slices.Contains(pids, monitor) {
		t.Errorf("the monitor %d is in the pod's cgroup %s: %v", monitor, parent, pids)
	}

	p, err := stats.New(stats.Options{NodeName: "n", Runtime: noStats{rt}, Cgroups: cg,
		ContainerCgroup: func(_ statsapi.PodReference, cid string) string { return parent + "/" + cid }})
	if err != nil {
		t.Fatal(err)
	}
	var s *statsapi.Summary
	eventually(t, "the container's CPU time in the summary", func() bool {
		if s, err = p.Summary(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		return len(s.Pods) == 1 && len(s.Pods[0].Containers) == 1 && s.Pods[0].Containers[0].CPU != nil &&
			*s.Pods[0].Containers[0].CPU.UsageCoreNanoSeconds > 0
	})
	c := s.Pods[0].Containers[0]
	if c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 {
		t.Errorf("container memory %+v, want a working set", c.Memory)
	}
	if pc := s.Pods[0].CPU; pc == nil || pc.UsageCoreNanoSeconds == nil || *pc.UsageCoreNanoSeconds == 0 {
		t.Errorf("pod CPU %+v, want some", pc)
	}
	if pm := s.Pods[0].Memory; pm == nil || pm.WorkingSetBytes == nil || *pm.WorkingSetBytes == 0 {
		t.Errorf("pod memory %+v, want a working set", pm)
	}

	// The resource metrics metrics-server scrapes (kubectl top pod).
	reg := prometheus.NewRegistry()
	reg.MustRegister(&metrics.ResourceCollector{Context: t.Context(), Provider: p})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pod"] == "p" && labels["namespace"] == "default" {
				series[f.GetName()] = true
			}
		}
	}
	for _, name := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
		"pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes"} {
		if !series[name] {
			t.Errorf("/metrics/resource has no %s for the pod", name)
		}
	}

	if err := rt.StopContainer(t.Context(), id, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container's cgroup removed once it ended", func() bool { return !cg.Exists(name) && !present(name) })
}

// noStats is the runtime without CRI stats, as the agent's summary sees
// it.
type noStats struct{ *backend.Runtime }

func (noStats) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, grpcstatus.Error(codes.Unimplemented, "no stats")
}

func (noStats) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, grpcstatus.Error(codes.Unimplemented, "no stats")
}

// present reports whether the cgroup's directory is left in the memory
// hierarchy (v1) or the unified one.
func present(name string) bool {
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		if fi, err := os.Stat(root + name); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// TestContainerOOMKilled: a container over its pod's memory limit is
// killed by the kernel in its own cgroup below the pod's, and exits 137
// with reason OOMKilled; its monitor, outside the pod's cgroup, is never
// the one killed.
func TestContainerOOMKilled(t *testing.T) {
	cg, parent := podCgroup(t)
	limit := int64(32 << 20)
	if err := cg.Update(parent, &cgroup.ResourceConfig{Memory: &limit}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	t.Cleanup(func() { rt.Close() })
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-oom"},
		LogDirectory: t.TempDir(),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent},
	}
	sb, err := rt.RunPodSandbox(t.Context(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemovePodSandbox(context.Background(), sb) })
	id := container(t, rt, sb, cfg, "", "sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo survived`)
	if err := rt.StartContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container exited", func() bool { return status(t, rt, id).State == runtimeapi.ContainerState_CONTAINER_EXITED })
	if st := status(t, rt, id); st.ExitCode != 137 || st.Reason != "OOMKilled" {
		t.Errorf("exit %d reason %q, want 137 OOMKilled", st.ExitCode, st.Reason)
	}
}
