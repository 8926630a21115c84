package nodekit_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentNodeCgroupSizedToAllocatable, on the host's cgroups (v1 or v2):
// the node's pod cgroup is limited as the kubelet's
// enforceNodeAllocatable: [pods] does: memory to the capacity less
// system-reserved and kube-reserved (the hard eviction threshold is left
// in, so that eviction acts before the OOM killer), cpu shares from the
// cpu capacity less the reservations, pids.max to the host's PIDs less the
// reserved ones; while the allocatable resources reported for admission
// also leave out the eviction threshold.
func TestAgentNodeCgroupSizedToAllocatable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write the host's cgroups (CI runs as root)")
	}
	info, err := cgroup.Detect("")
	if err != nil || !info.Has("memory") || !info.Has("cpu") || !info.Has("pids") {
		t.Skipf("no cgroup cpu, memory and pids controllers on this host (%v)", err)
	}
	root := fmt.Sprintf("nodekit-test-%08x", rand.Uint32())
	t.Cleanup(func() {
		if m, err := cgroup.Open(""); err == nil {
			for _, name := range []string{root + "/burstable", root + "/besteffort", root} {
				_ = m.Destroy(t.Context(), name)
			}
		}
	})
	pidMax := readHostInt(t, "/proc/sys/kernel/pid_max")
	if tm := readHostInt(t, "/proc/sys/kernel/threads-max"); tm < pidMax {
		pidMax = tm
	}

	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	h := startAgent(t, rt, nodekit.Options{
		Cgroups: cgroup.PodManagerOptions{Root: root},
		Sources: []nodekit.NamedSource{{Name: "test", Source: make(chanSource, 1)}},
		NodeResources: nodekit.NodeResourcesOptions{
			SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("512Mi")},
			KubeReserved:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi"), "pid": resource.MustParse("100")},
		},
		Node: node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("4Gi")}},
	})

	// 4Gi - 512Mi - 256Mi; 3 cpus; pid_max - 100.
	wantMemory := strconv.FormatInt(4<<30-768<<20, 10)
	wantPids := strconv.FormatInt(pidMax-100, 10)
	var files map[string]string
	if info.Mode == cgroup.ModeUnified {
		dir := filepath.Join(info.Unified, root)
		files = map[string]string{
			filepath.Join(dir, "memory.max"): wantMemory,
			filepath.Join(dir, "cpu.weight"): strconv.FormatUint(cgroup.CPUSharesToWeight(3072), 10),
			filepath.Join(dir, "pids.max"):   wantPids,
		}
	} else {
		mem, _ := info.Mountpoint("memory")
		cpu, _ := info.Mountpoint("cpu")
		pids, _ := info.Mountpoint("pids")
		files = map[string]string{
			filepath.Join(mem, root, "memory.limit_in_bytes"): wantMemory,
			filepath.Join(cpu, root, "cpu.shares"):            "3072",
			filepath.Join(pids, root, "pids.max"):             wantPids,
		}
	}
	for path, want := range files {
		eventually(t, waitTimeout, path+" = "+want, func() bool {
			b, err := os.ReadFile(path)
			return err == nil && strings.TrimSpace(string(b)) == want
		})
	}
	// Admission's allocatable leaves out the hard eviction threshold of
	// memory (100Mi) too.
	alloc := h.agent.Allocatable()
	if got, want := alloc.Memory().Value(), int64(4<<30-868<<20); got != want {
		t.Errorf("Allocatable memory = %d, want %d", got, want)
	}
}

func readHostInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
