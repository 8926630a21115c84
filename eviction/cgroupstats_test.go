package eviction

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCgroupStatsV1: memory.available is MemTotal less the root cgroup's
// usage less total_inactive_file, as the kubelet computes it; a pod's
// working set and processes come from its cgroup, its storage from its
// directories.
func TestCgroupStatsV1(t *testing.T) {
	proc, cg, dir := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(proc, "meminfo"), "MemTotal:        1000000 kB\nMemFree:          100000 kB\n")
	writeFile(t, filepath.Join(proc, "sys/kernel/pid_max"), "4194304\n")
	writeFile(t, filepath.Join(proc, "sys/kernel/threads-max"), "30000\n")
	writeFile(t, filepath.Join(proc, "loadavg"), "0.10 0.20 0.30 2/250 12345\n")
	writeFile(t, filepath.Join(cg, "memory/memory.usage_in_bytes"), "600000000\n")
	writeFile(t, filepath.Join(cg, "memory/memory.stat"), "cache 1\ntotal_inactive_file 100000000\n")
	p := pod("p", 0, "", false) // BestEffort
	writeFile(t, filepath.Join(cg, "memory/kubepods/besteffort/podp/memory.usage_in_bytes"), "5000\n")
	writeFile(t, filepath.Join(cg, "memory/kubepods/besteffort/podp/memory.stat"), "total_inactive_file 1000\n")
	writeFile(t, filepath.Join(cg, "pids/kubepods/besteffort/podp/pids.current"), "7\n")
	writeFile(t, filepath.Join(dir, "empty/data"), string(make([]byte, 8192)))
	c := &CgroupStats{
		CgroupfsRoot:  cg,
		ProcRoot:      proc,
		PodCgroupRoot: "/kubepods",
		NodeFsPath:    dir,
		Pods:          func() []*v1.Pod { return []*v1.Pod{p} },
		PodDirs:       func(*v1.Pod) []string { return []string{filepath.Join(dir, "empty"), filepath.Join(dir, "absent")} },
	}
	s, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *s.Memory, (MemoryStats{Capacity: 1024000000, WorkingSet: 500000000, Available: 524000000, InactiveFile: 100000000}); got != want {
		t.Errorf("memory %+v, want %+v", got, want)
	}
	if got, want := *s.PIDs, (PIDStats{Capacity: 30000, Available: 29750}); got != want {
		t.Errorf("pids %+v, want %+v", got, want)
	}
	if s.NodeFs == nil || s.NodeFs.CapacityBytes == 0 {
		t.Errorf("nodefs %+v", s.NodeFs)
	}
	ps := s.Pods["p"]
	if ps.MemoryWorkingSet == nil || *ps.MemoryWorkingSet != 4000 || ps.Processes == nil || *ps.Processes != 7 {
		t.Errorf("pod stats %+v", ps)
	}
	if ps.EphemeralStorage == nil || *ps.EphemeralStorage < 8192 || *ps.Inodes != 2 {
		t.Errorf("pod storage %v bytes, %v inodes; want at least 8192 bytes and 2 inodes", ps.EphemeralStorage, ps.Inodes)
	}
	// Nothing readable: an error, not zeros.
	c.ProcRoot, c.NodeFsPath = t.TempDir(), filepath.Join(dir, "absent")
	if s, err := c.Stats(t.Context()); err == nil {
		t.Errorf("Stats with nothing readable = %+v, want an error", s)
	}
}

// TestCgroupStatsMemoryBudget: with MemoryCapacity and MemoryCgroup,
// memory.available is the budget less that cgroup's working set (v1 and
// v2), whatever the host's memory.
func TestCgroupStatsMemoryBudget(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		proc, cg, dir := fakeProc(t), t.TempDir(), t.TempDir()
		if v2 {
			writeFile(t, filepath.Join(cg, "kubepods/memory.current"), "300000000\n")
			writeFile(t, filepath.Join(cg, "kubepods/memory.stat"), "inactive_file 100000000\n")
		} else {
			writeFile(t, filepath.Join(cg, "memory/kubepods/memory.usage_in_bytes"), "300000000\n")
			writeFile(t, filepath.Join(cg, "memory/kubepods/memory.stat"), "total_inactive_file 100000000\n")
		}
		c := &CgroupStats{CgroupfsRoot: cg, ProcRoot: proc, NodeFsPath: dir, MemoryCapacity: 500000000, MemoryCgroup: "/kubepods"}
		s, err := c.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *s.Memory, (MemoryStats{Capacity: 500000000, WorkingSet: 200000000, Available: 300000000, InactiveFile: 100000000}); got != want {
			t.Errorf("v2 %v: memory %+v, want %+v", v2, got, want)
		}
	}
}

// fakeProc is a /proc with 1000000 kB of memory, 100000 kB free, and 250
// of 4194304 tasks.
func fakeProc(t *testing.T) string {
	proc := t.TempDir()
	writeFile(t, filepath.Join(proc, "meminfo"), "MemTotal:        1000000 kB\nMemFree:          100000 kB\n")
	writeFile(t, filepath.Join(proc, "sys/kernel/pid_max"), "4194304\n")
	writeFile(t, filepath.Join(proc, "loadavg"), "0.10 0.20 0.30 2/250 12345\n")
	return proc
}
