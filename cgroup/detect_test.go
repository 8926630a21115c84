package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const hybridMountinfo = `22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
25 22 0:23 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
29 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
30 25 0:28 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
31 25 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
32 1 0:30 / /other/cgroup/cpu rw - cgroup cgroup rw,cpu
`

const v1Mountinfo = `25 22 0:23 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
33 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`

func TestDetectFromMounts(t *testing.T) {
	unified := t.TempDir()
	if err := os.WriteFile(filepath.Join(unified, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hybridRoot := t.TempDir()
	hybridUnified := filepath.Join(hybridRoot, "unified")
	if err := os.Mkdir(hybridUnified, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hybridUnified, "cgroup.controllers"), []byte("hugetlb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustParse := func(s string) []mount {
		m, err := parseMountinfo(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name   string
		root   string
		mounts []mount
		magic  map[string]int64
		want   Info
	}{{
		name:   "hybrid: v1 hierarchies with a cgroup2 mount at unified",
		root:   hybridRoot,
		mounts: mustParse(strings.ReplaceAll(hybridMountinfo, "/sys/fs/cgroup", hybridRoot)),
		magic:  map[string]int64{hybridRoot: 0x01021994, hybridUnified: cgroup2Magic},
		want: Info{Mode: ModeHybrid, Root: hybridRoot, Unified: hybridUnified,
			Hierarchies: []Hierarchy{
				{Mountpoint: hybridRoot + "/cpu", Controllers: []string{"cpu"}},
				{Mountpoint: hybridRoot + "/cpuacct", Controllers: []string{"cpuacct"}},
				{Mountpoint: hybridRoot + "/memory", Controllers: []string{"memory"}},
				{Mountpoint: hybridRoot + "/pids", Controllers: []string{"pids"}},
				{Mountpoint: hybridRoot + "/systemd", Name: "systemd"},
			},
			Controllers:        []string{"cpu", "cpuacct", "memory", "pids"},
			UnifiedControllers: []string{"hugetlb"},
		},
	}, {
		name:   "v1 with co-mounted controllers, mounted twice",
		root:   "/sys/fs/cgroup",
		mounts: mustParse(v1Mountinfo),
		magic:  map[string]int64{"/sys/fs/cgroup": 0x01021994},
		want: Info{Mode: ModeV1, Root: "/sys/fs/cgroup",
			Hierarchies: []Hierarchy{
				{Mountpoint: "/sys/fs/cgroup/cpu", Controllers: []string{"cpu", "cpuacct"}},
				{Mountpoint: "/sys/fs/cgroup/cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}},
				{Mountpoint: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
			},
			Controllers: []string{"cpu", "cpuacct", "memory"},
		},
	}, {
		name:  "unified: cgroup2 at the root",
		root:  unified,
		magic: map[string]int64{unified: cgroup2Magic},
		want: Info{Mode: ModeUnified, Root: unified, Unified: unified,
			Controllers: []string{"cpu", "cpuset", "io", "memory", "pids"}, UnifiedControllers: []string{"cpu", "cpuset", "io", "memory", "pids"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := detect(tt.root, tt.mounts, func(p string) (int64, error) { return tt.magic[p], nil })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("detect (-want +got):\n%s", diff)
			}
		})
	}
	// The shortest mount point wins for a controller mounted twice.
	info, _ := detect("/sys/fs/cgroup", mustParse(v1Mountinfo), func(string) (int64, error) { return 0, nil })
	if mp, _ := info.Mountpoint("cpuacct"); mp != "/sys/fs/cgroup/cpu" {
		t.Errorf("Mountpoint(cpuacct) = %q, want /sys/fs/cgroup/cpu", mp)
	}
}

func TestDetectNothing(t *testing.T) {
	_, err := Detect(t.TempDir())
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("Detect(empty dir) = %v, want ErrNotSupported", err)
	}
}

// TestDetectHost logs what the machine has; it checks only what must hold
// for any answer.
func TestDetectHost(t *testing.T) {
	if _, err := os.Stat(DefaultRoot); err != nil {
		t.Skipf("no %s on this machine", DefaultRoot)
	}
	info, err := Detect("")
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	t.Logf("host: mode %s, controllers %v, cgroup2 at %q with %v, hierarchies %d, emulated %v",
		info.Mode, info.Controllers, info.Unified, info.UnifiedControllers, len(info.Hierarchies), info.Emulated)
	if info.Emulated || info.Mode == ModeNone {
		t.Errorf("the host's %s detected as %+v", DefaultRoot, info)
	}
	if (info.Mode == ModeV1 || info.Mode == ModeHybrid) && len(info.Hierarchies) == 0 {
		t.Errorf("mode %s without hierarchies", info.Mode)
	}
}
