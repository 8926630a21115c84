package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultRoot is where the cgroup filesystems are mounted.
const DefaultRoot = "/sys/fs/cgroup"

// cgroup2Magic is the statfs f_type of a cgroup2 filesystem.
const cgroup2Magic = 0x63677270

// Mode is the way the host mounts cgroups.
type Mode int

// The modes.
const (
	// ModeNone: no cgroup filesystem found.
	ModeNone Mode = iota
	// ModeV1: only cgroup v1 hierarchies (one per controller or group of
	// controllers).
	ModeV1
	// ModeHybrid: cgroup v1 hierarchies hold the controllers, and a cgroup2
	// filesystem (usually at <root>/unified) holds none or few of them.
	ModeHybrid
	// ModeUnified: one cgroup2 filesystem at the root holds every
	// controller.
	ModeUnified
)

func (m Mode) String() string {
	switch m {
	case ModeV1:
		return "v1"
	case ModeHybrid:
		return "hybrid"
	case ModeUnified:
		return "v2"
	}
	return "none"
}

// Hierarchy is one cgroup v1 hierarchy.
type Hierarchy struct {
	// Mountpoint of the hierarchy, e.g. /sys/fs/cgroup/cpu.
	Mountpoint string
	// Controllers bound to it, e.g. [cpu cpuacct]; empty for a named
	// hierarchy.
	Controllers []string
	// Name of a named hierarchy without controllers ("systemd" for
	// name=systemd); "" otherwise.
	Name string
}

// Info describes the cgroup filesystems found under a root.
type Info struct {
	// Mode of the host.
	Mode Mode
	// Root the filesystems were looked for under, e.g. /sys/fs/cgroup.
	Root string
	// Hierarchies are the cgroup v1 hierarchies (ModeV1 and ModeHybrid),
	// sorted by mount point.
	Hierarchies []Hierarchy
	// Unified is the cgroup2 mount point: Root in ModeUnified, usually
	// <Root>/unified in ModeHybrid, "" in ModeV1.
	Unified string
	// Controllers are the cgroup v1 controllers mounted (ModeV1,
	// ModeHybrid), or those the cgroup2 root offers in cgroup.controllers
	// (ModeUnified); sorted.
	Controllers []string
	// UnifiedControllers are the controllers the cgroup2 root offers in
	// ModeHybrid and ModeUnified (often none in ModeHybrid); sorted.
	UnifiedControllers []string
	// Emulated is true when Root is not a cgroup mount but a plain
	// directory laid out like one (see Detect): the manager then emulates
	// the kernel's side (files of new cgroups, subtree_control, killing)
	// on regular files, for tests.
	Emulated bool
}

// Has reports whether controller is available (see Controllers).
func (i Info) Has(controller string) bool { return slices.Contains(i.Controllers, controller) }

// Mountpoint returns the mount point of the cgroup v1 hierarchy holding
// controller, the shortest one when it is mounted twice (as the kubelet
// chooses).
func (i Info) Mountpoint(controller string) (string, bool) {
	best := ""
	for _, h := range i.Hierarchies {
		if slices.Contains(h.Controllers, controller) && (best == "" || len(h.Mountpoint) < len(best)) {
			best = h.Mountpoint
		}
	}
	return best, best != ""
}

// knownV1Controllers are the cgroup v1 controllers a mount option can name.
var knownV1Controllers = []string{
	"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb",
	"memory", "misc", "net_cls", "net_prio", "perf_event", "pids", "rdma",
}

// Detect finds the cgroup filesystems under root (DefaultRoot when ""):
// the mode from the filesystem magic numbers (statfs: cgroup2 at root
// means ModeUnified; else a cgroup2 filesystem at <root>/unified means
// ModeHybrid; else ModeV1), the cgroup v1 hierarchies and their controllers
// from /proc/self/mountinfo, and the cgroup2 controllers from its
// cgroup.controllers.
//
// When no cgroup filesystem is mounted at or under root, Detect reads root
// as a plain directory laid out like one, for tests (cgroup/cgrouptest
// builds such layouts): a cgroup.controllers file at root means
// ModeUnified; otherwise every subdirectory holding a cgroup.procs file is
// a v1 hierarchy whose controllers are its name split at commas ("cpu",
// "cpu,cpuacct"; a name that is no controller, such as "systemd", makes a
// named hierarchy), and a subdirectory "unified" holding cgroup.controllers
// makes it ModeHybrid. Such an Info is marked Emulated. A root with
// neither is an error matching ErrNotSupported.
func Detect(root string) (Info, error) {
	if root == "" {
		root = DefaultRoot
	}
	root = filepath.Clean(root)
	f, err := os.Open("/proc/self/mountinfo")
	var mounts []mount
	if err == nil {
		mounts, err = parseMountinfo(f)
		f.Close()
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("cgroup: read mountinfo: %w", err)
	}
	return detect(root, mounts, fsMagic)
}

// detect is Detect with the mounts and statfs given.
func detect(root string, mounts []mount, magic func(string) (int64, error)) (Info, error) {
	info := Info{Root: root}
	var v1 []mount
	var cgroup2 []mount
	for _, m := range mounts {
		if m.Mountpoint != root && !strings.HasPrefix(m.Mountpoint, root+"/") {
			continue
		}
		switch m.FSType {
		case "cgroup":
			v1 = append(v1, m)
		case "cgroup2":
			cgroup2 = append(cgroup2, m)
		}
	}
	rootMagic, err := magic(root)
	if err != nil {
		return Info{}, fmt.Errorf("cgroup: statfs %s: %w", root, err)
	}
	if rootMagic == cgroup2Magic {
		info.Mode = ModeUnified
		info.Unified = root
		if info.Controllers, err = readControllers(root); err != nil {
			return Info{}, err
		}
		info.UnifiedControllers = info.Controllers
		return info, nil
	}
	if len(v1) == 0 && len(cgroup2) == 0 {
		return detectLayout(root)
	}
	info.Mode = ModeV1
	seen := map[string]bool{}
	for _, m := range v1 {
		if seen[m.Mountpoint] {
			continue
		}
		seen[m.Mountpoint] = true
		h := Hierarchy{Mountpoint: m.Mountpoint}
		for _, o := range strings.Split(m.SuperOptions, ",") {
			if name, ok := strings.CutPrefix(o, "name="); ok {
				h.Name = name
			} else if slices.Contains(knownV1Controllers, o) {
				h.Controllers = append(h.Controllers, o)
			}
		}
		info.Hierarchies = append(info.Hierarchies, h)
	}
	for _, m := range cgroup2 {
		mg, err := magic(m.Mountpoint)
		if err != nil || mg != cgroup2Magic {
			continue
		}
		info.Mode = ModeHybrid
		info.Unified = m.Mountpoint
		if info.UnifiedControllers, err = readControllers(m.Mountpoint); err != nil {
			return Info{}, err
		}
		break
	}
	if len(info.Hierarchies) == 0 {
		// A cgroup2 mount below root but nothing else: treat as unified
		// at that mount point.
		info.Mode = ModeUnified
		info.Root = info.Unified
		info.Controllers = info.UnifiedControllers
		return info, nil
	}
	finishV1(&info)
	return info, nil
}

// detectLayout reads a plain directory laid out like a cgroup mount.
func detectLayout(root string) (Info, error) {
	info := Info{Root: root, Emulated: true}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		info.Mode = ModeUnified
		info.Unified = root
		c, err := readControllers(root)
		if err != nil {
			return Info{}, err
		}
		info.Controllers, info.UnifiedControllers = c, c
		return info, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return Info{}, fmt.Errorf("cgroup: no cgroup filesystem at %s: %w", root, errors.Join(ErrNotSupported, err))
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		if e.Name() == "unified" {
			if _, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err == nil {
				info.Unified = dir
				if info.UnifiedControllers, err = readControllers(dir); err != nil {
					return Info{}, err
				}
				continue
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		h := Hierarchy{Mountpoint: dir}
		for _, c := range strings.Split(e.Name(), ",") {
			if slices.Contains(knownV1Controllers, c) {
				h.Controllers = append(h.Controllers, c)
			}
		}
		if len(h.Controllers) == 0 {
			h.Name = e.Name()
		}
		info.Hierarchies = append(info.Hierarchies, h)
	}
	if len(info.Hierarchies) == 0 {
		return Info{}, fmt.Errorf("cgroup: no cgroup filesystem at %s: %w", root, ErrNotSupported)
	}
	info.Mode = ModeV1
	if info.Unified != "" {
		info.Mode = ModeHybrid
	}
	finishV1(&info)
	return info, nil
}

func finishV1(info *Info) {
	slices.SortFunc(info.Hierarchies, func(a, b Hierarchy) int { return strings.Compare(a.Mountpoint, b.Mountpoint) })
	for _, h := range info.Hierarchies {
		for _, c := range h.Controllers {
			if !slices.Contains(info.Controllers, c) {
				info.Controllers = append(info.Controllers, c)
			}
		}
	}
	slices.Sort(info.Controllers)
}

func readControllers(dir string) ([]string, error) {
	p := filepath.Join(dir, "cgroup.controllers")
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, &FileError{Op: "read", Controller: "cgroup", Path: p, Err: unwrapPathError(err)}
	}
	c := strings.Fields(string(data))
	slices.Sort(c)
	return c, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
