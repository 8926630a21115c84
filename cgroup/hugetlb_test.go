package cgroup_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

func TestHugePageSizeName(t *testing.T) {
	for _, tt := range []struct {
		bytes int64
		want  string
	}{{64 << 10, "64KB"}, {2 << 20, "2MB"}, {32 << 20, "32MB"}, {1 << 30, "1GB"}, {16 << 30, "16GB"}} {
		if got := cgroup.HugePageSizeName(tt.bytes); got != tt.want {
			t.Errorf("HugePageSizeName(%d) = %q, want %q", tt.bytes, got, tt.want)
		}
	}
}

func TestHugePageLimits(t *testing.T) {
	got := cgroup.HugePageLimits(rl("cpu", "1", "hugepages-2Mi", "6Mi", "hugepages-1Gi", "2Gi", "hugepages-2048Ki", "2Mi", "hugepages-bad", "1"))
	want := map[int64]int64{2 << 20: 8 << 20, 1 << 30: 2 << 30}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HugePageLimits (-want +got):\n%s", diff)
	}
}

// v1WithHugetlb is a cgroup v1 layout with a hugetlb hierarchy offering
// 2MB and 1GB pages.
func v1WithHugetlb(t *testing.T) string {
	root := cgrouptest.V1(t)
	dir := filepath.Join(root, "hugetlb")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"cgroup.procs": "", "tasks": "",
		"hugetlb.2MB.limit_in_bytes": "9223372036854771712",
		"hugetlb.1GB.limit_in_bytes": "9223372036854771712",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPodManagerHugetlb: the pod cgroup's hugetlb limits are the pod's
// hugepages requests, every other size 0; the root cgroup's are the
// allocatable hugepages; the QoS cgroups are left unlimited.
func TestPodManagerHugetlb(t *testing.T) {
	pod := podOf("h1", ctr("a", rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "10Mi"), rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "10Mi")))
	bPodNoHuge := podOf("h2", ctr("a", rl("cpu", "100m"), nil))
	for _, tt := range []struct {
		name             string
		root             func(*testing.T) string
		where, two, one  string
		unlimited, limit string
	}{
		{"v1", v1WithHugetlb, "hugetlb", "hugetlb.2MB.limit_in_bytes", "hugetlb.1GB.limit_in_bytes", "9223372036854771712", "1073741824"},
		{"v2", func(t *testing.T) string { return cgrouptest.V2(t, "cpu", "cpuset", "hugetlb", "io", "memory", "pids") }, "",
			"hugetlb.2MB.max", "hugetlb.1GB.max", "max", "1073741824"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.root(t)
			pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root})
			if err := pm.SetAllocatable(rl("cpu", "2", "memory", "1Gi", "hugepages-2Mi", "20Mi", "hugepages-1Gi", "1Gi")); err != nil {
				t.Fatal(err)
			}
			parent, err := pm.EnsurePod(pod)
			if err != nil {
				t.Fatalf("EnsurePod: %v", err)
			}
			other, err := pm.EnsurePod(bPodNoHuge)
			if err != nil {
				t.Fatalf("EnsurePod: %v", err)
			}
			got := map[string]string{}
			for _, c := range []struct{ label, cg string }{{"root", "kubepods"}, {"burstable", "kubepods/burstable"}, {"pod", parent}, {"other", other}} {
				got[c.label+" 2MB"] = cgrouptest.Read(t, root, tt.where, c.cg, tt.two)
				got[c.label+" 1GB"] = cgrouptest.Read(t, root, tt.where, c.cg, tt.one)
			}
			want := map[string]string{
				"root 2MB": "20971520", "root 1GB": tt.limit,
				"burstable 2MB": tt.unlimited, "burstable 1GB": tt.unlimited,
				"pod 2MB": "10485760", "pod 1GB": "0",
				"other 2MB": "0", "other 1GB": "0",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("hugetlb limits (-want +got):\n%s", diff)
			}
			mgr, err := cgroup.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := mgr.Config(parent)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[int64]int64{2 << 20: 10 << 20, 1 << 30: 0}, rc.HugePageLimits); diff != "" {
				t.Errorf("Config().HugePageLimits (-want +got):\n%s", diff)
			}
			// A size the host lacks cannot be limited above 0.
			err = mgr.Update(parent, &cgroup.ResourceConfig{HugePageLimits: map[int64]int64{64 << 10: 1 << 20}})
			if !errors.Is(err, cgroup.ErrNotSupported) {
				t.Errorf("Update with 64KB pages: %v, want ErrNotSupported", err)
			}
		})
	}
}

// TestPodManagerNoHugetlb: without the hugetlb controller, hugepages are
// not limited and nothing fails, as with the kubelet.
func TestPodManagerNoHugetlb(t *testing.T) {
	root := cgrouptest.V1(t)
	pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root, Allocatable: rl("cpu", "2", "hugepages-2Mi", "20Mi")})
	pod := podOf("h1", ctr("a", rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "10Mi"), rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "10Mi")))
	if _, err := pm.EnsurePod(pod); err != nil {
		t.Fatalf("EnsurePod: %v", err)
	}
}

// TestPodManagerSetAllocatable: a later SetAllocatable limits the root
// cgroup at once.
func TestPodManagerSetAllocatable(t *testing.T) {
	root := cgrouptest.V2(t)
	pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root})
	if err := pm.EnsureNode(); err != nil {
		t.Fatal(err)
	}
	if got := cgrouptest.Read(t, root, "kubepods", "memory.max"); got != "max" {
		t.Errorf("memory.max before = %s, want max", got)
	}
	if err := pm.SetAllocatable(rl("cpu", "1500m", "memory", "512Mi", "pid", "4000")); err != nil {
		t.Fatal(err)
	}
	got := []string{cgrouptest.Read(t, root, "kubepods", "cpu.weight"), cgrouptest.Read(t, root, "kubepods", "memory.max"), cgrouptest.Read(t, root, "kubepods", "pids.max")}
	// 1500m: 1536 shares, weight 1 + 1534*9999/262142 = 59.
	if diff := cmp.Diff([]string{"59", "536870912", "4000"}, got); diff != "" {
		t.Errorf("root cgroup (-want +got):\n%s", diff)
	}
	if err := pm.SetAllocatable(rl("memory", "-1")); err == nil {
		t.Error("SetAllocatable accepted a negative quantity")
	}
}

// TestHostHugetlb writes hugetlb limits in the host's cgroups when the
// kernel offers the hugetlb controller: through a PodManager where it is
// mounted with cpu and memory (cgroup v1, or v2), else, on a hybrid host
// whose cgroup2 hierarchy holds it, through a cgroup v2 Manager on that
// hierarchy.
func TestHostHugetlb(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write the host's cgroups")
	}
	info, err := cgroup.Detect("")
	if err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	var mgr cgroup.Manager
	var name string
	switch {
	case info.Has("hugetlb") && info.Has("cpu") && info.Has("memory"):
		if mgr, err = cgroup.NewManager(info); err != nil {
			t.Fatal(err)
		}
		top := testTop(t, mgr)
		pm := newPM(t, cgroup.PodManagerOptions{Root: top + "/kubepods", Manager: mgr})
		pod := podOf("hugetlb-host", ctr("a", rl("cpu", "100m", "memory", "64Mi", "hugepages-2Mi", "4Mi"), rl("cpu", "100m", "memory", "64Mi", "hugepages-2Mi", "4Mi")))
		if name, err = pm.EnsurePod(pod); err != nil {
			t.Fatalf("EnsurePod: %v", err)
		}
	case info.Mode == cgroup.ModeHybrid && slices.Contains(info.UnifiedControllers, "hugetlb"):
		t.Logf("hugetlb is in the cgroup2 hierarchy of a hybrid host (%s): a cgroup v2 manager there", info.Unified)
		unified := cgroup.Info{Mode: cgroup.ModeUnified, Root: info.Unified, Unified: info.Unified,
			Controllers: info.UnifiedControllers, UnifiedControllers: info.UnifiedControllers}
		if mgr, err = cgroup.NewManager(unified); err != nil {
			t.Fatal(err)
		}
		name = "/" + testTop(t, mgr) + "/pod"
		if err := mgr.Create(name, &cgroup.ResourceConfig{HugePageLimits: map[int64]int64{2 << 20: 4 << 20}}); err != nil {
			t.Fatalf("Create: %v", err)
		}
	default:
		t.Skipf("the host has no hugetlb controller (v1 %v, cgroup2 %v)", info.Controllers, info.UnifiedControllers)
	}
	rc, err := mgr.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.HugePageLimits) == 0 {
		t.Fatalf("no hugetlb limit files for %s", name)
	}
	for size, l := range rc.HugePageLimits {
		want := int64(0)
		if size == 2<<20 {
			want = 4 << 20
		}
		if l != want {
			t.Errorf("hugetlb %s limit = %d, want %d", cgroup.HugePageSizeName(size), l, want)
		}
	}
	t.Logf("%s: hugetlb limits %v", name, rc.HugePageLimits)
}
