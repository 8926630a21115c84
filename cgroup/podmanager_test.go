package cgroup_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

func newPM(t *testing.T, opts cgroup.PodManagerOptions) *cgroup.PodManager {
	t.Helper()
	opts.Logger = testr.New(t)
	pm, err := cgroup.NewPodManager(opts)
	if err != nil {
		t.Fatalf("NewPodManager: %v", err)
	}
	return pm
}

var (
	gPod  = podOf("g1", ctr("a", rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi")))
	bPod  = podOf("b1", ctr("a", rl("cpu", "250m", "memory", "32Mi"), nil))
	bePod = podOf("be1", ctr("a", nil, nil))
)

func TestPodManagerHierarchy(t *testing.T) {
	for _, tt := range []struct {
		name   string
		root   func(testing.TB) string
		where  string // a hierarchy directory to look in
		shares [2]string
	}{
		{"v1", func(t testing.TB) string { return cgrouptest.V1(t) }, "cpu", [2]string{"cpu.shares", "2"}},
		{"hybrid", func(t testing.TB) string { return cgrouptest.Hybrid(t) }, "cpu", [2]string{"cpu.shares", "2"}},
		{"v2", func(t testing.TB) string { return cgrouptest.V2(t) }, "", [2]string{"cpu.weight", "1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.root(t)
			pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root})
			if err := pm.EnsureNode(); err != nil {
				t.Fatalf("EnsureNode: %v", err)
			}
			for _, d := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
				if !cgrouptest.Exists(root, tt.where, d) {
					t.Errorf("%s missing", d)
				}
			}
			if got := cgrouptest.Read(t, root, tt.where, "kubepods/besteffort", tt.shares[0]); got != tt.shares[1] {
				t.Errorf("besteffort %s = %s, want %s", tt.shares[0], got, tt.shares[1])
			}
			want := map[types.UID]string{
				"g1":  "/kubepods/podg1",
				"b1":  "/kubepods/burstable/podb1",
				"be1": "/kubepods/besteffort/podbe1",
			}
			got := map[types.UID]string{}
			for _, p := range []*v1.Pod{gPod, bPod, bePod} {
				parent, err := pm.EnsurePod(p)
				if err != nil {
					t.Fatalf("EnsurePod(%s): %v", p.UID, err)
				}
				got[p.UID] = parent
				if !cgrouptest.Exists(root, tt.where, parent) || !pm.PodExists(p) || pm.CgroupName(p) != parent {
					t.Errorf("%s: cgroup %s not there", p.UID, parent)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cgroup parents (-want +got):\n%s", diff)
			}
			uids, err := pm.Pods()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]types.UID{"b1", "be1", "g1"}, uids); diff != "" {
				t.Errorf("Pods (-want +got):\n%s", diff)
			}
			if err := pm.DestroyPod(t.Context(), "b1"); err != nil {
				t.Fatalf("DestroyPod: %v", err)
			}
			if cgrouptest.Exists(root, tt.where, "kubepods/burstable/podb1") {
				t.Error("DestroyPod left the cgroup")
			}
			if err := pm.DestroyPod(t.Context(), "nope"); err != nil {
				t.Errorf("DestroyPod of a pod without a cgroup: %v", err)
			}
			if uids, _ := pm.Pods(); !cmp.Equal(uids, []types.UID{"be1", "g1"}) {
				t.Errorf("Pods after DestroyPod = %v", uids)
			}
		})
	}
}

// TestPodManagerValues checks the files each pod cgroup gets on cgroup v1
// and v2.
func TestPodManagerValues(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		opts   cgroup.PodManagerOptions
		wantV1 map[string]string
		wantV2 map[string]string
	}{{
		name: "guaranteed",
		pod:  gPod,
		opts: cgroup.PodManagerOptions{PodPidsLimit: 1024, MemoryQoS: true},
		wantV1: map[string]string{"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000",
			"memory/memory.limit_in_bytes": "67108864", "pids/pids.max": "1024"},
		wantV2: map[string]string{"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "67108864", "memory.min": "67108864", "pids.max": "1024"},
	}, {
		name: "guaranteed without CPU quota",
		pod:  gPod,
		opts: cgroup.PodManagerOptions{DisableCPUQuota: true},
		wantV1: map[string]string{"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
			"memory/memory.limit_in_bytes": "67108864", "pids/pids.max": "max"},
		wantV2: map[string]string{"cpu.weight": "20", "cpu.max": "max 100000", "memory.max": "67108864", "memory.min": "0", "pids.max": "max"},
	}, {
		name:   "guaranteed with a CFS period of 50ms",
		pod:    gPod,
		opts:   cgroup.PodManagerOptions{CPUCFSQuotaPeriod: 50 * time.Millisecond},
		wantV1: map[string]string{"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "25000", "cpu/cpu.cfs_period_us": "50000"},
		wantV2: map[string]string{"cpu.weight": "20", "cpu.max": "25000 50000"},
	}, {
		name: "burstable with requests only",
		pod:  bPod,
		opts: cgroup.PodManagerOptions{MemoryQoS: true},
		wantV1: map[string]string{"cpu/cpu.shares": "256", "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
			"memory/memory.limit_in_bytes": "9223372036854771712", "pids/pids.max": "max"},
		wantV2: map[string]string{"cpu.weight": "10", "cpu.max": "max 100000", "memory.max": "max", "memory.min": "33554432", "pids.max": "max"},
	}, {
		name: "besteffort",
		pod:  bePod,
		opts: cgroup.PodManagerOptions{MemoryQoS: true, PodPidsLimit: -1},
		wantV1: map[string]string{"cpu/cpu.shares": "2", "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
			"memory/memory.limit_in_bytes": "9223372036854771712", "pids/pids.max": "max"},
		wantV2: map[string]string{"cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max", "memory.min": "0", "pids.max": "max"},
	}}
	for _, tt := range tests {
		t.Run(tt.name+"/v1", func(t *testing.T) {
			root := cgrouptest.V1(t)
			opts := tt.opts
			opts.CgroupfsRoot = root
			parent, err := newPM(t, opts).EnsurePod(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k := range tt.wantV1 {
				ctl, file, _ := strings.Cut(k, "/")
				got[k] = cgrouptest.Read(t, root, ctl, parent, file)
			}
			if diff := cmp.Diff(tt.wantV1, got); diff != "" {
				t.Errorf("v1 files of %s (-want +got):\n%s", parent, diff)
			}
		})
		t.Run(tt.name+"/v2", func(t *testing.T) {
			root := cgrouptest.V2(t)
			opts := tt.opts
			opts.CgroupfsRoot = root
			parent, err := newPM(t, opts).EnsurePod(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k := range tt.wantV2 {
				got[k] = cgrouptest.Read(t, root, parent, k)
			}
			if diff := cmp.Diff(tt.wantV2, got); diff != "" {
				t.Errorf("v2 files of %s (-want +got):\n%s", parent, diff)
			}
		})
	}
}

func TestPodManagerEnsureAndUpdatePod(t *testing.T) {
	root := cgrouptest.V1(t)
	pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root})
	pod := podOf("g2", ctr("a", rl("cpu", "1", "memory", "64Mi"), rl("cpu", "1", "memory", "64Mi")))
	if err := pm.UpdatePod(pod); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("UpdatePod before EnsurePod = %v, want ErrNotFound", err)
	}
	parent, err := pm.EnsurePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "128Mi"), Limits: rl("cpu", "2", "memory", "128Mi")}
	// EnsurePod leaves an existing cgroup as it is, as the kubelet does.
	if _, err := pm.EnsurePod(resized); err != nil {
		t.Fatal(err)
	}
	if got := cgrouptest.Read(t, root, "memory", parent, "memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("EnsurePod changed the existing cgroup: memory.limit_in_bytes %s", got)
	}
	if err := pm.UpdatePod(resized); err != nil {
		t.Fatal(err)
	}
	got := cgrouptest.Read(t, root, "memory", parent, "memory.limit_in_bytes") + " " + cgrouptest.Read(t, root, "cpu", parent, "cpu.cfs_quota_us")
	if got != "134217728 200000" {
		t.Errorf("after UpdatePod: memory limit and quota %q", got)
	}
	if _, err := pm.EnsurePod(podOf("", ctr("a", nil, nil))); err == nil {
		t.Error("EnsurePod of a pod without a UID succeeded")
	}
	if err := pm.DestroyPod(t.Context(), "../burstable"); err == nil {
		t.Error("DestroyPod of a UID with a slash succeeded")
	}
}

func TestPodManagerUpdateQoS(t *testing.T) {
	pods := []*v1.Pod{
		gPod,
		podOf("g3", ctr("a", rl("cpu", "1", "memory", "256Mi"), rl("cpu", "1", "memory", "256Mi"))),
		bPod, // 250m, 32Mi
		podOf("b2", ctr("a", rl("cpu", "100m", "memory", "96Mi"), nil)),
		podOf("b3", ctr("a", nil, rl("memory", "1Gi"))),
		bePod,
	}
	t.Run("shares on v1", func(t *testing.T) {
		root := cgrouptest.V1(t)
		pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root})
		if err := pm.UpdateQoS(pods); err != nil {
			t.Fatal(err)
		}
		// MilliCPUToShares(250+100) = 358.
		if b, be := cgrouptest.Read(t, root, "cpu/kubepods/burstable/cpu.shares"), cgrouptest.Read(t, root, "cpu/kubepods/besteffort/cpu.shares"); b != "358" || be != "2" {
			t.Errorf("burstable, besteffort cpu.shares = %s, %s; want 358, 2", b, be)
		}
		if err := pm.UpdateQoS([]*v1.Pod{gPod, bePod}); err != nil {
			t.Fatal(err)
		}
		if b := cgrouptest.Read(t, root, "cpu/kubepods/burstable/cpu.shares"); b != "2" {
			t.Errorf("burstable cpu.shares without burstable pods = %s, want 2", b)
		}
	})
	t.Run("memory reserve and memory QoS on v2", func(t *testing.T) {
		root := cgrouptest.V2(t)
		pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root, MemoryReservePercent: 50, MemoryQoS: true, Allocatable: rl("memory", "2Gi")})
		if err := pm.UpdateQoS(pods); err != nil {
			t.Fatal(err)
		}
		// Guaranteed requests 64+256 = 320Mi, Burstable 32+96 = 128Mi (b3
		// limits memory but requests none).
		got := map[string]string{}
		for _, f := range []string{"kubepods/memory.min", "kubepods/burstable/memory.min", "kubepods/burstable/memory.max", "kubepods/besteffort/memory.max", "kubepods/burstable/cpu.weight"} {
			got[f] = cgrouptest.Read(t, root, f)
		}
		want := map[string]string{
			"kubepods/memory.min":            fmt.Sprint((320 + 128) * mi),
			"kubepods/burstable/memory.min":  fmt.Sprint(128 * mi),
			"kubepods/burstable/memory.max":  fmt.Sprint((2048 - 160) * mi),
			"kubepods/besteffort/memory.max": fmt.Sprint((2048 - 160 - 64) * mi),
			"kubepods/burstable/cpu.weight":  "14", // 358 shares
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("QoS files (-want +got):\n%s", diff)
		}
	})
	t.Run("a limit below the usage is retried at the usage", func(t *testing.T) {
		inner, err := cgroup.Open(cgrouptest.V1(t))
		if err != nil {
			t.Fatal(err)
		}
		const usage = 1900 * mi
		fm := &busyManager{Manager: inner, usage: usage}
		pm := newPM(t, cgroup.PodManagerOptions{Manager: fm, MemoryReservePercent: 100, Allocatable: rl("memory", "2Gi")})
		if err := pm.UpdateQoS(pods); err != nil {
			t.Fatalf("UpdateQoS: %v", err)
		}
		// burstable 2048-320 = 1728Mi < usage → usage; besteffort 1728-128 = 1600Mi → usage.
		want := map[string]int64{"/kubepods/burstable": usage, "/kubepods/besteffort": usage}
		if diff := cmp.Diff(want, fm.limits); diff != "" {
			t.Errorf("memory limits written (-want +got):\n%s", diff)
		}
	})
}

// busyManager refuses memory limits below its usage, as the kernel does
// with EBUSY.
type busyManager struct {
	cgroup.Manager
	usage  int64
	limits map[string]int64
}

func (b *busyManager) Update(name string, rc *cgroup.ResourceConfig) error {
	if rc.Memory != nil {
		if *rc.Memory < b.usage {
			return &cgroup.FileError{Op: "write", Controller: "memory", Path: name + "/memory.limit_in_bytes", Err: syscall.EBUSY}
		}
		if b.limits == nil {
			b.limits = map[string]int64{}
		}
		b.limits[name] = *rc.Memory
	}
	return b.Manager.Update(name, rc)
}

func (b *busyManager) Stats(string) (*cgroup.Stats, error) {
	return &cgroup.Stats{MemoryUsage: uint64(b.usage)}, nil
}

func TestPodManagerAllocatableAndRoot(t *testing.T) {
	root := cgrouptest.V1(t)
	pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root, Root: "nodekit/kubepods", Allocatable: rl("cpu", "2", "memory", "1Gi", "pid", "1000")})
	parent, err := pm.EnsurePod(gPod)
	if err != nil {
		t.Fatal(err)
	}
	if parent != "/nodekit/kubepods/podg1" {
		t.Errorf("parent %q", parent)
	}
	got := []string{
		cgrouptest.Read(t, root, "cpu/nodekit/kubepods/cpu.shares"),
		cgrouptest.Read(t, root, "memory/nodekit/kubepods/memory.limit_in_bytes"),
		cgrouptest.Read(t, root, "pids/nodekit/kubepods/pids.max"),
	}
	if diff := cmp.Diff([]string{"2048", "1073741824", "1000"}, got); diff != "" {
		t.Errorf("root cgroup limits (-want +got):\n%s", diff)
	}
}

func TestPodManagerDisabled(t *testing.T) {
	empty := t.TempDir() // no cgroup layout: any access would fail
	pm := newPM(t, cgroup.PodManagerOptions{Disabled: true, CgroupfsRoot: empty})
	if pm.Enabled() {
		t.Error("Enabled")
	}
	parent, err := pm.EnsurePod(gPod)
	if parent != "" || err != nil {
		t.Errorf("EnsurePod = %q, %v; want \"\", nil", parent, err)
	}
	uids, err := pm.Pods()
	for _, err := range []error{pm.EnsureNode(), pm.UpdatePod(gPod), pm.DestroyPod(t.Context(), "x"), pm.UpdateQoS([]*v1.Pod{gPod}), err} {
		if err != nil {
			t.Errorf("disabled PodManager: %v", err)
		}
	}
	if uids != nil || pm.PodExists(gPod) || pm.CgroupName(gPod) != "" {
		t.Errorf("disabled PodManager reports cgroups: %v %v %q", uids, pm.PodExists(gPod), pm.CgroupName(gPod))
	}
}

func TestPodManagerNotSupported(t *testing.T) {
	pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: cgrouptest.V2(t, "cpu", "pids")})
	err := pm.EnsureNode()
	if !errors.Is(err, cgroup.ErrNotSupported) || !strings.Contains(err.Error(), "memory controller") {
		t.Errorf("EnsureNode without memory = %v", err)
	}
	if _, err := pm.EnsurePod(gPod); !errors.Is(err, cgroup.ErrNotSupported) {
		t.Errorf("EnsurePod without memory = %v", err)
	}
	pm = newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: t.TempDir()})
	if err := pm.EnsureNode(); !errors.Is(err, cgroup.ErrNotSupported) {
		t.Errorf("EnsureNode on a directory that is no cgroup root = %v", err)
	}
}

func TestPodManagerOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts cgroup.PodManagerOptions
	}{
		{"root is /", cgroup.PodManagerOptions{Root: "/"}},
		{"root leaves the hierarchy", cgroup.PodManagerOptions{Root: "../x"}},
		{"pids limit below -1", cgroup.PodManagerOptions{PodPidsLimit: -2}},
		{"reserve above 100", cgroup.PodManagerOptions{MemoryReservePercent: 101, Allocatable: rl("memory", "1Gi")}},
		{"reserve without allocatable memory", cgroup.PodManagerOptions{MemoryReservePercent: 10}},
		{"negative allocatable", cgroup.PodManagerOptions{Allocatable: rl("cpu", "-1")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := cgroup.NewPodManager(tt.opts); err == nil || !strings.HasPrefix(err.Error(), "cgroup: ") {
				t.Errorf("NewPodManager = %v, want a cgroup: error", err)
			}
		})
	}
	// The zero value is valid and does no I/O.
	if _, err := cgroup.NewPodManager(cgroup.PodManagerOptions{CgroupfsRoot: filepath.Join(t.TempDir(), "missing")}); err != nil {
		t.Errorf("NewPodManager did I/O or rejected defaults: %v", err)
	}
}

func TestPodManagerCFSQuotaPeriodBounds(t *testing.T) {
	for _, p := range []time.Duration{500 * time.Microsecond, 2 * time.Second, -time.Millisecond} {
		if _, err := cgroup.NewPodManager(cgroup.PodManagerOptions{CPUCFSQuotaPeriod: p}); err == nil {
			t.Errorf("CPUCFSQuotaPeriod %s accepted", p)
		}
	}
	// A quota below 1ms is raised to 1ms, whatever the period.
	rc := cgroup.ResourceConfigForPodWithPeriod(podOf("small", ctr("a", rl("cpu", "5m", "memory", "8Mi"), rl("cpu", "5m", "memory", "8Mi"))), true, 10*time.Millisecond)
	if *rc.CPUQuota != cgroup.MinQuotaPeriod || *rc.CPUPeriod != 10000 {
		t.Errorf("5m with a 10ms period: quota %d period %d, want 1000 10000", *rc.CPUQuota, *rc.CPUPeriod)
	}
}
