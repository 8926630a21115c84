package cgroup

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// emulatedFS plays the kernel's part on a plain directory laid out like a
// cgroup mount (Info.Emulated), so that the managers run unchanged in
// tests without root:
//
//   - a new directory gets the files a new cgroup has, with the kernel's
//     defaults (cgroup v1: the files of its parent; cgroup v2: the core
//     files plus those of the controllers its parent's subtree_control
//     enables);
//   - writing a file that does not exist fails with ENOENT, as on cgroupfs;
//   - cgroup.subtree_control accepts only controllers listed in
//     cgroup.controllers (ENOENT otherwise), refuses a cgroup holding
//     processes (EBUSY), and adds or removes the controllers' files in the
//     children;
//   - cgroup.procs moves the pid (out of the other cgroups of the
//     hierarchy); a v2 cgroup that enables controllers for its children
//     refuses processes (EBUSY);
//   - rmdir refuses a cgroup with children or processes (EBUSY);
//   - killing a process (or writing cgroup.kill) only removes the pid from
//     the cgroup.procs files: no signal is ever sent.
type emulatedFS struct {
	mu   sync.Mutex
	info Info
}

// v1ChildDefaults are the values of a new cgroup v1 cgroup's files; other
// files start empty.
var v1ChildDefaults = map[string]string{
	"cpu.shares":            "1024",
	"cpu.cfs_quota_us":      "-1",
	"cpu.cfs_period_us":     "100000",
	"memory.limit_in_bytes": "9223372036854771712",
	"memory.usage_in_bytes": "0",
	"memory.stat":           "total_inactive_file 0\n",
	"cpuacct.usage":         "0",
	"pids.max":              "max",
	"pids.current":          "0",
	"freezer.state":         "THAWED\n",
	"notify_on_release":     "0",
	"cgroup.clone_children": "0",

	"hugetlb.2MB.limit_in_bytes": v1Unlimited,
	"hugetlb.1GB.limit_in_bytes": v1Unlimited,
}

// v2ControllerFiles are the interface files each cgroup v2 controller adds
// to a cgroup, with their defaults.
var v2ControllerFiles = map[string]map[string]string{
	"cpu":     {"cpu.weight": "100", "cpu.max": "max 100000", "cpu.stat": "usage_usec 0\n"},
	"cpuset":  {"cpuset.cpus": "", "cpuset.mems": ""},
	"io":      {"io.weight": "default 100"},
	"memory":  {"memory.max": "max", "memory.min": "0", "memory.current": "0", "memory.stat": "inactive_file 0\n"},
	"pids":    {"pids.max": "max", "pids.current": "0"},
	"hugetlb": {"hugetlb.2MB.max": "max", "hugetlb.1GB.max": "max"},
}

// v1Unlimited is what cgroup v1 shows for a memory limit of -1 (4 KiB
// pages).
const v1Unlimited = "9223372036854771712"

// location finds the hierarchy holding path: its mount point and whether
// it is cgroup v2.
func (e *emulatedFS) location(path string) (mountpoint string, v2 bool) {
	for _, h := range e.info.Hierarchies {
		if path == h.Mountpoint || strings.HasPrefix(path, h.Mountpoint+"/") {
			return h.Mountpoint, false
		}
	}
	return e.info.Unified, true
}

func errno(op, path string, err syscall.Errno) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}

func (e *emulatedFS) mkdir(path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := os.Mkdir(path, 0o755); err != nil {
		return err
	}
	parent := filepath.Dir(path)
	_, v2 := e.location(path)
	if !v2 {
		entries, err := os.ReadDir(parent)
		if err != nil {
			return err
		}
		for _, ent := range entries {
			if ent.Type().IsRegular() {
				if err := os.WriteFile(filepath.Join(path, ent.Name()), []byte(v1ChildDefaults[ent.Name()]), 0o644); err != nil {
					return err
				}
			}
		}
		return nil
	}
	enabled, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	files := map[string]string{
		"cgroup.procs":           "",
		"cgroup.controllers":     strings.Join(strings.Fields(string(enabled)), " "),
		"cgroup.subtree_control": "",
		"cgroup.type":            "domain",
		"cgroup.kill":            "",
	}
	for _, c := range strings.Fields(string(enabled)) {
		for f, v := range v2ControllerFiles[c] {
			files[f] = v
		}
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(path, f), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (e *emulatedFS) rmdir(path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, ent := range entries {
		if ent.IsDir() {
			return errno("remove", path, syscall.EBUSY)
		}
	}
	if procs, _ := os.ReadFile(filepath.Join(path, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
		return errno("remove", path, syscall.EBUSY)
	}
	for _, ent := range entries {
		if err := os.Remove(filepath.Join(path, ent.Name())); err != nil {
			return err
		}
	}
	return os.Remove(path)
}

func (e *emulatedFS) readFile(path string) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return os.ReadFile(path)
}

func (e *emulatedFS) readDir(path string) ([]fs.DirEntry, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return os.ReadDir(path)
}

func (e *emulatedFS) writeFile(path, value string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return errno("open", path, syscall.ENOENT)
	}
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	mountpoint, v2 := e.location(path)
	switch base {
	case "cgroup.procs":
		pid, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil || pid <= 0 {
			return errno("write", path, syscall.EINVAL)
		}
		if v2 && dir != mountpoint {
			if sub, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); len(strings.TrimSpace(string(sub))) > 0 {
				return errno("write", path, syscall.EBUSY)
			}
		}
		if err := removePid(mountpoint, pid); err != nil {
			return err
		}
		procs, _ := os.ReadFile(path)
		return os.WriteFile(path, append(procs, []byte(strconv.Itoa(pid)+"\n")...), 0o644)
	case "cgroup.subtree_control":
		if !v2 {
			break
		}
		return e.subtreeControl(dir, mountpoint, value)
	case "cgroup.kill":
		if strings.TrimSpace(value) != "1" {
			return errno("write", path, syscall.EINVAL)
		}
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
				return os.WriteFile(p, nil, 0o644)
			}
			return err
		})
	case "memory.limit_in_bytes", "hugetlb.2MB.limit_in_bytes", "hugetlb.1GB.limit_in_bytes":
		if strings.TrimSpace(value) == "-1" {
			value = v1Unlimited
		}
	}
	return os.WriteFile(path, []byte(value), 0o644)
}

func (e *emulatedFS) subtreeControl(dir, mountpoint, value string) error {
	path := filepath.Join(dir, "cgroup.subtree_control")
	avail, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	cur, _ := os.ReadFile(path)
	enabled := strings.Fields(string(cur))
	for _, tok := range strings.Fields(value) {
		if len(tok) < 2 || (tok[0] != '+' && tok[0] != '-') {
			return errno("write", path, syscall.EINVAL)
		}
		c := tok[1:]
		if !slices.Contains(strings.Fields(string(avail)), c) {
			return errno("write", path, syscall.ENOENT)
		}
		if tok[0] == '+' && !slices.Contains(enabled, c) {
			enabled = append(enabled, c)
		}
		if tok[0] == '-' {
			enabled = slices.DeleteFunc(enabled, func(s string) bool { return s == c })
		}
	}
	if dir != mountpoint && len(enabled) > 0 {
		if procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
			return errno("write", path, syscall.EBUSY)
		}
	}
	slices.Sort(enabled)
	if err := os.WriteFile(path, []byte(strings.Join(enabled, " ")), 0o644); err != nil {
		return err
	}
	// The children's controllers follow.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		child := filepath.Join(dir, ent.Name())
		old, _ := os.ReadFile(filepath.Join(child, "cgroup.controllers"))
		for _, c := range strings.Fields(string(old)) {
			if !slices.Contains(enabled, c) {
				for f := range v2ControllerFiles[c] {
					os.Remove(filepath.Join(child, f))
				}
			}
		}
		for _, c := range enabled {
			if !slices.Contains(strings.Fields(string(old)), c) {
				for f, v := range v2ControllerFiles[c] {
					if err := os.WriteFile(filepath.Join(child, f), []byte(v), 0o644); err != nil {
						return err
					}
				}
			}
		}
		if err := os.WriteFile(filepath.Join(child, "cgroup.controllers"), []byte(strings.Join(enabled, " ")), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// removePid takes pid out of every cgroup.procs below root.
func removePid(root string, pid int) error {
	s := strconv.Itoa(pid)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines := strings.Fields(string(data))
		if !slices.Contains(lines, s) {
			return nil
		}
		lines = slices.DeleteFunc(lines, func(l string) bool { return l == s })
		out := strings.Join(lines, "\n")
		if out != "" {
			out += "\n"
		}
		return os.WriteFile(p, []byte(out), 0o644)
	})
}

func (e *emulatedFS) kill(pid int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, h := range e.info.Hierarchies {
		if err := removePid(h.Mountpoint, pid); err != nil {
			return err
		}
	}
	if e.info.Unified != "" {
		return removePid(e.info.Unified, pid)
	}
	return nil
}
