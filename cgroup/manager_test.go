package cgroup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

func open(t *testing.T, root string) cgroup.Manager {
	t.Helper()
	m, err := cgroup.Open(root)
	if err != nil {
		t.Fatalf("Open(%s): %v", root, err)
	}
	if !m.Info().Emulated {
		t.Fatalf("Open(%s) is not emulated", root)
	}
	return m
}

var podConfig = &cgroup.ResourceConfig{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(64 * mi), MemoryMin: i64(32 * mi), PidsLimit: i64(100)}

func TestManagerCreateV1(t *testing.T) {
	root := cgrouptest.V1(t)
	m := open(t, root)
	const name = "/kubepods/burstable/pod1"
	if err := m.Create(name, podConfig); err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, h := range append(cgrouptest.V1Controllers, "systemd") {
		if !cgrouptest.Exists(root, h, name) {
			t.Errorf("%s missing in the %s hierarchy", name, h)
		}
	}
	got := map[string]string{}
	for _, f := range [][2]string{{"cpu", "cpu.shares"}, {"cpu", "cpu.cfs_quota_us"}, {"cpu", "cpu.cfs_period_us"}, {"memory", "memory.limit_in_bytes"}, {"pids", "pids.max"}} {
		got[f[1]] = cgrouptest.Read(t, root, f[0], name, f[1])
	}
	want := map[string]string{"cpu.shares": "512", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000", "memory.limit_in_bytes": "67108864", "pids.max": "100"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	// Every level of a new cpuset cgroup takes its parent's cpus and mems.
	for _, level := range []string{"kubepods", "kubepods/burstable", "kubepods/burstable/pod1"} {
		if c, m := cgrouptest.Read(t, root, "cpuset", level, "cpuset.cpus"), cgrouptest.Read(t, root, "cpuset", level, "cpuset.mems"); c != cgrouptest.CPUs || m != cgrouptest.Mems {
			t.Errorf("%s: cpuset.cpus %q, cpuset.mems %q; want %q, %q", level, c, m, cgrouptest.CPUs, cgrouptest.Mems)
		}
	}
	if !m.Exists(name) || m.Exists("/kubepods/besteffort/pod1") {
		t.Errorf("Exists(%s) = %v, Exists(besteffort) = %v", name, m.Exists(name), m.Exists("/kubepods/besteffort/pod1"))
	}
	cfg, err := m.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := *podConfig
	wantCfg.MemoryMin = nil // no memory.min on v1
	if diff := cmp.Diff(&wantCfg, cfg); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	if err := m.Update(name, &cgroup.ResourceConfig{Memory: i64(-1), CPUQuota: i64(-1), PidsLimit: i64(-1)}); err != nil {
		t.Fatal(err)
	}
	cfg, _ = m.Config(name)
	if *cfg.Memory != -1 || *cfg.CPUQuota != -1 || *cfg.PidsLimit != -1 || *cfg.CPUShares != 512 {
		t.Errorf("after Update to no limits: %+v", cfg)
	}
}

func TestManagerCreateV2(t *testing.T) {
	root := cgrouptest.V2(t)
	m := open(t, root)
	const name = "/kubepods/burstable/pod1"
	if err := m.Create(name, podConfig); err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, level := range []string{"", "kubepods", "kubepods/burstable"} {
		if got := cgrouptest.Read(t, root, level, "cgroup.subtree_control"); got != "cpu cpuset io memory pids" {
			t.Errorf("%q cgroup.subtree_control = %q", level, got)
		}
	}
	if got := cgrouptest.Read(t, root, name, "cgroup.subtree_control"); got != "" {
		t.Errorf("the pod cgroup enables %q for its children; the runtime does that", got)
	}
	got := map[string]string{}
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max", "memory.min", "pids.max"} {
		got[f] = cgrouptest.Read(t, root, name, f)
	}
	want := map[string]string{"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "67108864", "memory.min": "33554432", "pids.max": "100"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	cfg, err := m.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := *podConfig
	wantCfg.CPUShares = u64(501) // 512 → weight 20 → back to the fewest shares giving 20
	if diff := cmp.Diff(&wantCfg, cfg); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	if err := m.Update(name, &cgroup.ResourceConfig{Memory: i64(-1), CPUQuota: i64(-1), CPUPeriod: u64(100000)}); err != nil {
		t.Fatal(err)
	}
	if got := cgrouptest.Read(t, root, name, "memory.max") + "/" + cgrouptest.Read(t, root, name, "cpu.max"); got != "max/max 100000" {
		t.Errorf("after Update to no limits: memory.max/cpu.max = %q", got)
	}
}

func TestManagerHybrid(t *testing.T) {
	root := cgrouptest.Hybrid(t)
	m := open(t, root)
	if m.Info().Mode != cgroup.ModeHybrid {
		t.Fatalf("mode %s", m.Info().Mode)
	}
	const name = "/kubepods/pod1"
	if err := m.Create(name, podConfig); err != nil {
		t.Fatal(err)
	}
	if !cgrouptest.Exists(root, "unified", name) {
		t.Error("the cgroup is missing in the cgroup2 hierarchy of the hybrid host")
	}
	if got := cgrouptest.Read(t, root, "unified", "cgroup.subtree_control"); got != "" {
		t.Errorf("the cgroup2 root of a hybrid host got controllers %q", got)
	}
	if err := m.AddProcess(name, 4242); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"cpu", "memory", "systemd", "unified"} {
		if got := cgrouptest.Read(t, root, h, name, "cgroup.procs"); got != "4242" {
			t.Errorf("%s cgroup.procs = %q", h, got)
		}
	}
	if err := m.Destroy(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"cpu", "memory", "systemd", "unified"} {
		if cgrouptest.Exists(root, h, name) {
			t.Errorf("%s left in %s", name, h)
		}
	}
}

// TestManagerLifecycle runs processes, children and destruction on every
// emulated layout.
func TestManagerLifecycle(t *testing.T) {
	for _, tt := range []struct {
		name   string
		layout func(testing.TB) string
		dirs   []string // where the cgroup lives below the root
	}{
		{"v1", func(t testing.TB) string { return cgrouptest.V1(t) }, []string{"cpu", "memory", "pids", "systemd"}},
		{"v2", func(t testing.TB) string { return cgrouptest.V2(t) }, []string{""}},
		{"hybrid", func(t testing.TB) string { return cgrouptest.Hybrid(t) }, []string{"cpu", "unified"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.layout(t)
			m := open(t, root)
			const pod = "/kubepods/burstable/pod1"
			for _, n := range []string{pod, pod + "/ctr1", pod + "/ctr2", "/kubepods/burstable/pod2"} {
				if err := m.Create(n, nil); err != nil {
					t.Fatalf("Create(%s): %v", n, err)
				}
			}
			if err := m.AddProcess(pod+"/ctr1", 101); err != nil {
				t.Fatal(err)
			}
			if err := m.AddProcess(pod+"/ctr2", 102); err != nil {
				t.Fatal(err)
			}
			if err := m.AddProcess("/kubepods/burstable/pod2", 201); err != nil {
				t.Fatal(err)
			}
			pids, err := m.Pids(pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int{101, 102}, pids); diff != "" {
				t.Errorf("Pids (-want +got):\n%s", diff)
			}
			// Moving a process takes it out of its old cgroup.
			if err := m.AddProcess(pod+"/ctr2", 101); err != nil {
				t.Fatal(err)
			}
			if pids, _ := m.Pids(pod + "/ctr1"); len(pids) != 0 {
				t.Errorf("ctr1 still lists %v after its process moved", pids)
			}
			children, err := m.Children("/kubepods/burstable")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"/kubepods/burstable/pod1", "/kubepods/burstable/pod2"}, children); diff != "" {
				t.Errorf("Children (-want +got):\n%s", diff)
			}
			if err := m.Destroy(t.Context(), pod); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			for _, d := range tt.dirs {
				if cgrouptest.Exists(root, d, pod) {
					t.Errorf("%s left in %q", pod, d)
				}
				if !cgrouptest.Exists(root, d, "/kubepods/burstable/pod2") {
					t.Errorf("pod2 gone from %q", d)
				}
			}
			if pids, _ := m.Pids("/kubepods"); !cmp.Equal(pids, []int{201}) {
				t.Errorf("Pids(/kubepods) = %v after Destroy, want [201]", pids)
			}
			if err := m.Destroy(t.Context(), pod); err != nil {
				t.Errorf("Destroy of a cgroup that is gone: %v", err)
			}
			// A cancelled context stops the wait for processes.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			err = m.Destroy(ctx, "/kubepods/burstable/pod2")
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "[201] still running") {
				t.Errorf("Destroy with a cancelled context = %v", err)
			}
		})
	}
}

func TestManagerErrors(t *testing.T) {
	t.Run("memory controller not enabled on v2; the new directories are removed", func(t *testing.T) {
		root := cgrouptest.V2(t, "cpu", "pids")
		m := open(t, root)
		err := m.Create("/kubepods/pod1", &cgroup.ResourceConfig{Memory: i64(64 * mi)})
		var nse *cgroup.NotSupportedError
		if !errors.Is(err, cgroup.ErrNotSupported) || !errors.As(err, &nse) || nse.Controller != "memory" {
			t.Fatalf("Create = %v, want a NotSupportedError for memory", err)
		}
		want := "cgroup: memory controller not enabled (cgroup.controllers: cpu pids) in " + filepath.Join(root, "kubepods/pod1")
		if err.Error() != want {
			t.Errorf("error %q\nwant      %q", err, want)
		}
		if cgrouptest.Exists(root, "kubepods") {
			t.Error("Create left kubepods behind after failing")
		}
	})
	t.Run("pids controller not mounted on v1", func(t *testing.T) {
		root := cgrouptest.V1(t)
		if err := os.RemoveAll(filepath.Join(root, "pids")); err != nil {
			t.Fatal(err)
		}
		m := open(t, root)
		err := m.Create("/kubepods/pod1", &cgroup.ResourceConfig{PidsLimit: i64(10)})
		if !errors.Is(err, cgroup.ErrNotSupported) || err.Error() != "cgroup: pids controller not mounted in "+root {
			t.Errorf("Create = %v", err)
		}
	})
	t.Run("a failed write names the file, the value and the controller", func(t *testing.T) {
		root := cgrouptest.V1(t)
		// Without the file in the root, new cgroups lack it too.
		if err := os.Remove(filepath.Join(root, "memory", "memory.limit_in_bytes")); err != nil {
			t.Fatal(err)
		}
		m := open(t, root)
		err := m.Create("/kubepods/pod1", &cgroup.ResourceConfig{Memory: i64(64 * mi)})
		want := `cgroup: write "67108864" to ` + filepath.Join(root, "memory/kubepods/pod1/memory.limit_in_bytes") + " (memory controller): no such file or directory"
		if err == nil || err.Error() != want {
			t.Errorf("Create = %v\nwant     %s", err, want)
		}
		var fe *cgroup.FileError
		if !errors.As(err, &fe) || fe.Controller != "memory" || fe.Op != "write" {
			t.Errorf("not a FileError for memory: %#v", err)
		}
		if cgrouptest.Exists(root, "cpu", "kubepods") {
			t.Error("Create left kubepods behind after failing")
		}
	})
	t.Run("names", func(t *testing.T) {
		m := open(t, cgrouptest.V1(t))
		for _, tc := range []struct {
			name string
			err  error
		}{
			{"update of a missing cgroup", m.Update("/nope", &cgroup.ResourceConfig{})},
			{"create the root", m.Create("/", nil)},
			{"destroy the root", m.Destroy(t.Context(), "")},
			{"leave the hierarchy", m.Create("/kubepods/../../etc", nil)},
		} {
			if tc.err == nil {
				t.Errorf("%s: no error", tc.name)
			}
		}
		if err := m.Update("/nope", nil); !errors.Is(err, cgroup.ErrNotFound) {
			t.Errorf("Update of a missing cgroup = %v, want ErrNotFound", err)
		}
	})
}
