// Package cgrouptest lays out directories that look like cgroup
// filesystems, so that cgroup.PodManager and cgroup.Manager run in tests
// without root and without touching the host's cgroups.
//
// Point cgroup.PodManagerOptions.CgroupfsRoot (or cgroup.Open) at such a
// directory: cgroup.Detect finds no cgroup mount there, reads the layout,
// and the manager emulates the kernel's side on the regular files (the
// files of a new cgroup, cgroup.subtree_control, killing; see
// cgroup.Info.Emulated). No signal is ever sent to a process.
//
// # Usage
//
//	root := cgrouptest.V1(t)
//	pm, _ := cgroup.NewPodManager(cgroup.PodManagerOptions{CgroupfsRoot: root})
//	parent, _ := pm.EnsurePod(pod) // "/kubepods/pod<UID>" for a Guaranteed pod
//	got := cgrouptest.Read(t, root, "memory", parent, "memory.limit_in_bytes")
package cgrouptest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// V1Controllers are the hierarchies V1 lays out, one per controller.
var V1Controllers = []string{"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids"}

// V2Controllers are the controllers V2 offers when given none.
var V2Controllers = []string{"cpu", "cpuset", "io", "memory", "pids"}

// CPUs and Mems are the root cpuset's cpuset.cpus and cpuset.mems.
const (
	CPUs = "0-3"
	Mems = "0"
)

// The root files of each cgroup v1 hierarchy, beyond the core ones. A
// new cgroup gets the same names (cgroup v1 gives children the files of
// their parent; the kernel's root lacks a few of these, which is harmless
// here).
var v1Files = map[string]map[string]string{
	"cpu": {
		"cpu.shares":        "1024",
		"cpu.cfs_period_us": "100000",
		"cpu.cfs_quota_us":  "-1",
	},
	"cpuacct": {"cpuacct.usage": "0"},
	"cpuset":  {"cpuset.cpus": CPUs, "cpuset.mems": Mems},
	"memory": {
		"memory.limit_in_bytes": "9223372036854771712",
		"memory.usage_in_bytes": "0",
		"memory.stat":           "total_inactive_file 0\n",
	},
	"pids":    {"pids.max": "max", "pids.current": "0"},
	"freezer": {"freezer.state": "THAWED\n"},
	"devices": {"devices.list": "a *:* rwm\n"},
}

var v1Core = map[string]string{
	"cgroup.procs":          "",
	"tasks":                 "",
	"cgroup.clone_children": "0",
	"notify_on_release":     "0",
}

func writeFiles(dir string, files ...map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, fs := range files {
		for name, v := range fs {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteV1 lays out a cgroup v1 root in dir: a hierarchy per controller of
// V1Controllers plus the named hierarchy "systemd".
func WriteV1(dir string) error {
	for _, c := range V1Controllers {
		if err := writeFiles(filepath.Join(dir, c), v1Core, v1Files[c]); err != nil {
			return err
		}
	}
	return writeFiles(filepath.Join(dir, "systemd"), v1Core)
}

// WriteV2 lays out a cgroup v2 root in dir offering controllers
// (V2Controllers when none) in cgroup.controllers, none enabled yet in
// cgroup.subtree_control.
func WriteV2(dir string, controllers ...string) error {
	if len(controllers) == 0 {
		controllers = V2Controllers
	}
	return writeFiles(dir, map[string]string{
		"cgroup.controllers":     strings.Join(controllers, " "),
		"cgroup.subtree_control": "",
		"cgroup.procs":           "",
		"cgroup.max.depth":       "max",
		"cpu.stat":               "usage_usec 0\n",
		"memory.stat":            "inactive_file 0\n",
	})
}

// WriteHybrid lays out a hybrid root in dir: WriteV1 plus a cgroup2
// hierarchy in dir/unified offering controllers (none when none given).
func WriteHybrid(dir string, controllers ...string) error {
	if err := WriteV1(dir); err != nil {
		return err
	}
	if len(controllers) == 0 {
		controllers = []string{}
	}
	return writeFiles(filepath.Join(dir, "unified"), map[string]string{
		"cgroup.controllers":     strings.Join(controllers, " "),
		"cgroup.subtree_control": "",
		"cgroup.procs":           "",
	})
}

func layout(t testing.TB, write func(string) error) string {
	t.Helper()
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatalf("cgrouptest: %v", err)
	}
	return dir
}

// V1 returns a new temporary directory laid out by WriteV1.
func V1(t testing.TB) string { return layout(t, WriteV1) }

// V2 returns a new temporary directory laid out by WriteV2.
func V2(t testing.TB, controllers ...string) string {
	return layout(t, func(d string) error { return WriteV2(d, controllers...) })
}

// Hybrid returns a new temporary directory laid out by WriteHybrid.
func Hybrid(t testing.TB, controllers ...string) string {
	return layout(t, func(d string) error { return WriteHybrid(d, controllers...) })
}

// Read returns the content of the file at the joined path, trimmed of
// surrounding space; the test fails when it cannot be read.
func Read(t testing.TB, elem ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(elem...))
	if err != nil {
		t.Fatalf("cgrouptest: %v", err)
	}
	return strings.TrimSpace(string(data))
}

// Exists reports whether the joined path exists.
func Exists(elem ...string) bool {
	_, err := os.Stat(filepath.Join(elem...))
	return err == nil
}
