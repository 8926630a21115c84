package cgroup_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
	"github.com/nodekit/nodekit/internal/leakcheck"
)

// These tests change the host's cgroups, under a unique top-level cgroup
// "nodekit-test-<random>" (leakcheck.CgroupPrefix) that t.Cleanup
// destroys.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to write the host's cgroups")
	}
}

// hostV1 skips unless the host has cgroup v1 with the memory controller.
func hostV1(t *testing.T) cgroup.Info {
	t.Helper()
	needRoot(t)
	info, err := cgroup.Detect("")
	if err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	if (info.Mode != cgroup.ModeV1 && info.Mode != cgroup.ModeHybrid) || !info.Has("memory") || !info.Has("cpu") {
		t.Skipf("no cgroup v1 cpu and memory controllers (mode %s, controllers %v)", info.Mode, info.Controllers)
	}
	return info
}

// testTop returns a unique top-level cgroup name and destroys it (with
// everything below) when the test ends.
func testTop(t *testing.T, m cgroup.Manager) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	top := leakcheck.CgroupPrefix() + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Destroy(ctx, "/"+top); err != nil {
			t.Errorf("cleanup of /%s: %v", top, err)
		}
	})
	return top
}

// proc is a process started by a test.
type proc struct {
	*exec.Cmd
	done chan struct{} // closed when Wait returned
	err  error         // Wait's result, once done
}

// start starts the command; the process is killed when the test ends.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{Cmd: exec.Command(name, args...), done: make(chan struct{})}
	if err := p.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Process.Kill()
		<-p.done
	})
	return p
}

// sleeper starts `sleep 60`.
func sleeper(t *testing.T) *proc { return start(t, "sleep", "60") }

func procCgroups(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func waitKilled(t *testing.T, p *proc) {
	t.Helper()
	select {
	case <-p.done:
		err := p.err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the process ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the process is still running after the cgroup was destroyed")
	}
}

func TestHostV1PodCgroup(t *testing.T) {
	info := hostV1(t)
	mgr, err := cgroup.NewManager(info)
	if err != nil {
		t.Fatal(err)
	}
	top := testTop(t, mgr)
	t.Logf("cgroup %s hierarchy at %s, test cgroup /%s", info.Mode, info.Root, top)
	pm, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Root: top + "/kubepods", Manager: mgr, PodPidsLimit: 100, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	pod := podOf("0b7c1e3a-real-v1", ctr("app", rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi")))
	parent, err := pm.EnsurePod(pod)
	if err != nil {
		t.Fatalf("EnsurePod: %v", err)
	}
	if want := "/" + top + "/kubepods/pod" + string(pod.UID); parent != want {
		t.Fatalf("cgroup parent %q, want %q", parent, want)
	}
	mount := func(c string) string {
		mp, ok := info.Mountpoint(c)
		if !ok {
			t.Fatalf("%s not mounted", c)
		}
		return mp
	}
	got := map[string]string{
		"cpu.shares":            cgrouptest.Read(t, mount("cpu"), parent, "cpu.shares"),
		"cpu.cfs_quota_us":      cgrouptest.Read(t, mount("cpu"), parent, "cpu.cfs_quota_us"),
		"cpu.cfs_period_us":     cgrouptest.Read(t, mount("cpu"), parent, "cpu.cfs_period_us"),
		"memory.limit_in_bytes": cgrouptest.Read(t, mount("memory"), parent, "memory.limit_in_bytes"),
		"besteffort cpu.shares": cgrouptest.Read(t, mount("cpu"), top, "kubepods/besteffort/cpu.shares"),
	}
	want := map[string]string{"cpu.shares": "512", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000",
		"memory.limit_in_bytes": "67108864", "besteffort cpu.shares": "2"}
	if info.Has("pids") {
		got["pids.max"] = cgrouptest.Read(t, mount("pids"), parent, "pids.max")
		want["pids.max"] = "100"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of %s (-want +got):\n%s", parent, diff)
	}
	t.Logf("%s: %v", parent, got)
	if info.Has("cpuset") {
		if c, r := cgrouptest.Read(t, mount("cpuset"), parent, "cpuset.cpus"), cgrouptest.Read(t, mount("cpuset"), "cpuset.cpus"); c != r {
			t.Errorf("cpuset.cpus %q, root has %q", c, r)
		}
	}

	sl := sleeper(t)
	pid := sl.Process.Pid
	if err := mgr.AddProcess(parent, pid); err != nil {
		t.Fatalf("AddProcess: %v", err)
	}
	// As the runtime does: a container cgroup below the pod's, the process
	// in it.
	if err := mgr.Create(parent+"/ctr1", nil); err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddProcess(parent+"/ctr1", pid); err != nil {
		t.Fatal(err)
	}
	pids, err := mgr.Pids(parent)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{pid}, pids); diff != "" {
		t.Errorf("Pids (-want +got):\n%s", diff)
	}
	pc := procCgroups(t, pid)
	for _, c := range []string{"cpu", "memory"} {
		if !strings.Contains(pc, ":"+c+":"+parent+"/ctr1\n") {
			t.Errorf("/proc/%d/cgroup does not place it in %s %s/ctr1:\n%s", pid, c, parent, pc)
		}
	}
	if uids, err := pm.Pods(); err != nil || !slices.Contains(uids, pod.UID) {
		t.Errorf("Pods = %v, %v; want it to list %s", uids, err, pod.UID)
	}

	start := time.Now()
	if err := pm.DestroyPod(t.Context(), pod.UID); err != nil {
		t.Fatalf("DestroyPod: %v", err)
	}
	t.Logf("DestroyPod killed 1 process and removed the cgroup in %v", time.Since(start).Round(time.Millisecond))
	waitKilled(t, sl)
	dirs := []string{}
	for _, h := range info.Hierarchies {
		dirs = append(dirs, filepath.Join(h.Mountpoint, parent))
	}
	if info.Unified != "" {
		dirs = append(dirs, filepath.Join(info.Unified, parent))
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after DestroyPod (%v)", d, err)
		}
	}
	if uids, err := pm.Pods(); err != nil || len(uids) != 0 {
		t.Errorf("Pods after DestroyPod = %v, %v", uids, err)
	}
}

func TestHostV1Errors(t *testing.T) {
	info := hostV1(t)
	mgr, err := cgroup.NewManager(info)
	if err != nil {
		t.Fatal(err)
	}
	top := testTop(t, mgr)
	cpu, _ := info.Mountpoint("cpu")
	err = mgr.Create("/"+top+"/x", &cgroup.ResourceConfig{CPUShares: u64(1)})
	want := `cgroup: write "1" to ` + filepath.Join(cpu, top, "x", "cpu.shares") + " (cpu controller): the kernel keeps 2"
	if err == nil || err.Error() != want {
		t.Errorf("Create with cpu.shares 1 = %v\nwant %s", err, want)
	}

	// A memory limit below what the cgroup's process holds: EBUSY.
	if err := mgr.Create("/"+top+"/busy", nil); err != nil {
		t.Fatal(err)
	}
	memory, _ := info.Mountpoint("memory")
	procs := filepath.Join(memory, top, "busy", "cgroup.procs")
	busy := start(t, "sh", "-c", `echo $$ > "$1" && exec sleep 60`, "sh", procs)
	var st *cgroup.Stats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err = mgr.Stats("/" + top + "/busy"); err == nil && st.MemoryUsage > 0 {
			break
		}
	}
	t.Logf("a sleep started in the cgroup: memory usage %d bytes, working set %d", st.MemoryUsage, st.MemoryWorkingSet)
	err = mgr.Update("/"+top+"/busy", &cgroup.ResourceConfig{Memory: i64(4096)})
	if err == nil {
		t.Skipf("the kernel accepted a 4096-byte limit with %d bytes used (it reclaimed them)", st.MemoryUsage)
	}
	t.Logf("Update to 4096 bytes: %v", err)
	var fe *cgroup.FileError
	if !errors.As(err, &fe) || !errors.Is(err, syscall.EBUSY) || fe.Controller != "memory" ||
		fe.Path != filepath.Join(memory, top, "busy", "memory.limit_in_bytes") || !strings.Contains(err.Error(), "is above the limit") {
		t.Errorf("Update below the usage = %v; want EBUSY naming memory.limit_in_bytes and the usage", err)
	}
	if err := mgr.Destroy(t.Context(), "/"+top+"/busy"); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	waitKilled(t, busy)
}

// TestV2PodCgroup runs the cgroup v2 manager on the host's cgroup2
// hierarchy when it is unified with the cpu, memory and pids controllers
// (and the test runs as root), otherwise on a temporary directory laid
// out like one; it logs which.
func TestV2PodCgroup(t *testing.T) {
	root, real := "", false
	if info, err := cgroup.Detect(""); err == nil && os.Geteuid() == 0 && info.Mode == cgroup.ModeUnified &&
		info.Has("cpu") && info.Has("memory") && info.Has("pids") {
		root, real = info.Root, true
		t.Logf("using the host's cgroup v2 hierarchy at %s (controllers %v)", info.Root, info.Controllers)
	} else {
		root = cgrouptest.V2(t)
		desc := "no cgroup filesystem"
		if err == nil {
			desc = fmt.Sprintf("the host is %s, cgroup2 controllers %v", info.Mode, info.UnifiedControllers)
		}
		t.Logf("using a temporary directory laid out as cgroup v2 (%s): %s", desc, root)
	}
	mgr, err := cgroup.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	top := testTop(t, mgr)
	pm, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Root: top + "/kubepods", Manager: mgr, PodPidsLimit: 100, MemoryQoS: true, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	pod := podOf("5d2f9a40-v2", ctr("app", rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi")))
	parent, err := pm.EnsurePod(pod)
	if err != nil {
		t.Fatalf("EnsurePod: %v", err)
	}
	got := map[string]string{"besteffort cpu.weight": cgrouptest.Read(t, root, top, "kubepods/besteffort/cpu.weight")}
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max", "memory.min", "pids.max"} {
		got[f] = cgrouptest.Read(t, root, parent, f)
	}
	want := map[string]string{"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "67108864", "memory.min": "67108864",
		"pids.max": "100", "besteffort cpu.weight": "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of %s (-want +got):\n%s", parent, diff)
	}
	for _, level := range []string{top, top + "/kubepods"} {
		sub := strings.Fields(cgrouptest.Read(t, root, level, "cgroup.subtree_control"))
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !slices.Contains(sub, c) {
				t.Errorf("%s cgroup.subtree_control %v lacks %s", level, sub, c)
			}
		}
	}
	pid := 4242 // emulated: a pid that only lives in the files
	var sl *proc
	if real {
		sl = sleeper(t)
		pid = sl.Process.Pid
	}
	if err := mgr.AddProcess(parent, pid); err != nil {
		t.Fatalf("AddProcess: %v", err)
	}
	if pids, err := mgr.Pids(parent); err != nil || !cmp.Equal(pids, []int{pid}) {
		t.Errorf("Pids = %v, %v; want [%d]", pids, err, pid)
	}
	if err := pm.DestroyPod(t.Context(), pod.UID); err != nil {
		t.Fatalf("DestroyPod: %v", err)
	}
	if real {
		waitKilled(t, sl)
	}
	if cgrouptest.Exists(root, parent) {
		t.Errorf("%s still there after DestroyPod", parent)
	}
}

// TestHostCgroup2Lifecycle creates, fills, kills and removes a cgroup in
// the host's cgroup2 hierarchy, whatever controllers it has (on a hybrid
// host, often none): cgroup.procs, cgroup.kill and rmdir on the real thing.
func TestHostCgroup2Lifecycle(t *testing.T) {
	needRoot(t)
	info, err := cgroup.Detect("")
	if err != nil || info.Unified == "" {
		t.Skipf("no cgroup2 hierarchy (mode %s, %v)", info.Mode, err)
	}
	mgr, err := cgroup.Open(info.Unified)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the host's cgroup2 hierarchy at %s, controllers %v", info.Unified, mgr.Info().Controllers)
	top := testTop(t, mgr)
	name := "/" + top + "/pod1"
	if err := mgr.Create(name, nil); err != nil {
		t.Fatal(err)
	}
	sl := sleeper(t)
	if err := mgr.AddProcess(name, sl.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if pc := procCgroups(t, sl.Process.Pid); !strings.Contains(pc, "0::"+name+"\n") {
		t.Errorf("/proc/%d/cgroup:\n%s", sl.Process.Pid, pc)
	}
	if pids, err := mgr.Pids("/" + top); err != nil || !cmp.Equal(pids, []int{sl.Process.Pid}) {
		t.Errorf("Pids = %v, %v", pids, err)
	}
	if err := mgr.Destroy(t.Context(), name); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	waitKilled(t, sl)
	if cgrouptest.Exists(info.Unified, name) {
		t.Errorf("%s still there", name)
	}
}
