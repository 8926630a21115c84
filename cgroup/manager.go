package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// location is one hierarchy a cgroup is made in.
type location struct {
	mountpoint string
	// controller names the hierarchy in errors: "cpu,cpuacct",
	// "name=systemd", "cgroup2".
	controller string
	v2         bool
}

// fsManager is the cgroupfs Manager for both versions.
type fsManager struct {
	info Info
	fs   fsys
	v2   bool
	locs []location
	// v2Enable are the controllers a v2 manager enables in the ancestors of
	// the cgroups it creates.
	v2Enable []string
}

var _ Manager = (*fsManager)(nil)

// v2Managed are the cgroup v2 controllers enabled for the cgroups the
// manager creates, those the root offers (rdma and misc are left to the
// runtime).
var v2Managed = []string{"cpu", "cpuset", "hugetlb", "io", "memory", "pids"}

// NewManager returns the cgroupfs Manager for info (from Detect): the
// cgroup v1 manager in ModeV1 and ModeHybrid (which also makes its cgroups
// in the cgroup2 hierarchy of a hybrid host, without controllers, as runc
// does), the cgroup v2 manager in ModeUnified. It does no I/O.
func NewManager(info Info) (Manager, error) {
	m := &fsManager{info: info, fs: realFS{}}
	if info.Emulated {
		m.fs = &emulatedFS{info: info}
	}
	switch info.Mode {
	case ModeV1, ModeHybrid:
		for _, h := range info.Hierarchies {
			c := strings.Join(h.Controllers, ",")
			if h.Name != "" {
				c = "name=" + h.Name
			}
			m.locs = append(m.locs, location{mountpoint: h.Mountpoint, controller: c})
		}
		if info.Mode == ModeHybrid && info.Unified != "" {
			m.locs = append(m.locs, location{mountpoint: info.Unified, controller: "cgroup2", v2: true})
		}
	case ModeUnified:
		m.v2 = true
		m.locs = []location{{mountpoint: info.Unified, controller: "cgroup2", v2: true}}
		for _, c := range v2Managed {
			if slices.Contains(info.Controllers, c) {
				m.v2Enable = append(m.v2Enable, c)
			}
		}
	default:
		return nil, fmt.Errorf("cgroup: no cgroup filesystem found under %q: %w", info.Root, ErrNotSupported)
	}
	return m, nil
}

// Open detects the cgroup filesystems under root (DefaultRoot when "") and
// returns their Manager: Detect then NewManager.
func Open(root string) (Manager, error) {
	info, err := Detect(root)
	if err != nil {
		return nil, err
	}
	return NewManager(info)
}

func (m *fsManager) Info() Info { return m.info }

// relName turns a cgroup name into a relative, cleaned path ("" for the
// root).
func relName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("cgroup: bad cgroup name %q", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("cgroup: cgroup name %q leaves the hierarchy", name)
		}
	}
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	return rel, nil
}

func nonRoot(name, op string) (string, error) {
	rel, err := relName(name)
	if err == nil && rel == "" {
		err = fmt.Errorf("cgroup: cannot %s the root cgroup", op)
	}
	return rel, err
}

func (m *fsManager) write(controller, dir, file, value string) error {
	p := filepath.Join(dir, file)
	if err := m.fs.writeFile(p, value); err != nil {
		return &FileError{Op: "write", Controller: controller, Path: p, Value: value, Err: unwrapPathError(err)}
	}
	return nil
}

func (m *fsManager) read(controller, dir, file string) (string, error) {
	p := filepath.Join(dir, file)
	data, err := m.fs.readFile(p)
	if err != nil {
		return "", &FileError{Op: "read", Controller: controller, Path: p, Err: unwrapPathError(err)}
	}
	return strings.TrimSpace(string(data)), nil
}

func (m *fsManager) readUint(controller, dir, file string) (uint64, error) {
	s, err := m.read(controller, dir, file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &FileError{Op: "read", Controller: controller, Path: filepath.Join(dir, file), Err: err}
	}
	return v, nil
}

func (m *fsManager) exists(dir string) bool {
	_, err := m.fs.readDir(dir)
	return err == nil
}

// present reports whether rel exists in any hierarchy.
func (m *fsManager) present(rel string) bool {
	for _, loc := range m.locs {
		if m.exists(filepath.Join(loc.mountpoint, rel)) {
			return true
		}
	}
	return false
}

// mkdirAll makes rel below loc's mount point, one level at a time; before
// each level it calls before(parent) if set. It returns the directories it
// made.
func (m *fsManager) mkdirAll(loc location, rel string, before func(parent string) error) ([]string, error) {
	var made []string
	cur := loc.mountpoint
	for _, part := range strings.Split(rel, "/") {
		if before != nil {
			if err := before(cur); err != nil {
				return made, err
			}
		}
		cur = filepath.Join(cur, part)
		if err := m.fs.mkdir(cur); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return made, &FileError{Op: "mkdir", Controller: loc.controller, Path: cur, Err: unwrapPathError(err)}
		}
		made = append(made, cur)
	}
	return made, nil
}

func (m *fsManager) Create(name string, res *ResourceConfig) error {
	rel, err := nonRoot(name, "create")
	if err != nil {
		return err
	}
	var made []string
	undo := func() {
		for i := len(made) - 1; i >= 0; i-- {
			_ = m.fs.rmdir(made[i])
		}
	}
	for _, loc := range m.locs {
		var before func(string) error
		if m.v2 {
			before = m.enableControllers
		}
		dirs, err := m.mkdirAll(loc, rel, before)
		made = append(made, dirs...)
		if err != nil {
			undo()
			return err
		}
		if !loc.v2 && strings.Contains(","+loc.controller+",", ",cpuset,") {
			if err := m.ensureCpuset(loc, rel); err != nil {
				undo()
				return err
			}
		}
	}
	if err := m.set(rel, res); err != nil {
		undo()
		return err
	}
	return nil
}

func (m *fsManager) Update(name string, res *ResourceConfig) error {
	rel, err := nonRoot(name, "update")
	if err != nil {
		return err
	}
	if !m.present(rel) {
		return fmt.Errorf("cgroup: update %s: %w", name, ErrNotFound)
	}
	return m.set(rel, res)
}

func (m *fsManager) set(rel string, res *ResourceConfig) error {
	if res == nil {
		return nil
	}
	if err := checkHugePageLimits(res.HugePageLimits); err != nil {
		return err
	}
	var err error
	if m.v2 {
		err = m.setV2(rel, res)
	} else {
		err = m.setV1(rel, res)
	}
	if err != nil {
		return err
	}
	return m.setHugetlb(rel, res.HugePageLimits)
}

func (m *fsManager) Exists(name string) bool {
	rel, err := relName(name)
	if err != nil {
		return false
	}
	if m.v2 {
		return m.existsV2(rel)
	}
	return m.existsV1(rel)
}

// walk calls fn for dir and each cgroup below it, parents first.
// removed reports whether err says the cgroup went while it was read: its
// directory is gone (not found), or the kernel removed it after its file
// or directory was opened (ENODEV). The runtime removes a container's
// cgroup when the container ends, while the agent walks its pod's.
func removed(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

func (m *fsManager) walk(dir string, fn func(dir string) error) error {
	entries, err := m.fs.readDir(dir)
	if err != nil {
		if removed(err) {
			return nil
		}
		return &FileError{Op: "read", Controller: "cgroup", Path: dir, Err: unwrapPathError(err)}
	}
	if err := fn(dir); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := m.walk(filepath.Join(dir, e.Name()), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *fsManager) Pids(name string) ([]int, error) {
	rel, err := relName(name)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, loc := range m.locs {
		err := m.walk(filepath.Join(loc.mountpoint, rel), func(dir string) error {
			p := filepath.Join(dir, "cgroup.procs")
			data, err := m.fs.readFile(p)
			if err != nil {
				if removed(err) {
					return nil
				}
				return &FileError{Op: "read", Controller: loc.controller, Path: p, Err: unwrapPathError(err)}
			}
			got, err := parsePids(data)
			if err != nil {
				return &FileError{Op: "read", Controller: loc.controller, Path: p, Err: err}
			}
			pids = append(pids, got...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

func (m *fsManager) AddProcess(name string, pid int) error {
	rel, err := relName(name)
	if err != nil {
		return err
	}
	for _, loc := range m.locs {
		if err := m.write(loc.controller, filepath.Join(loc.mountpoint, rel), "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (m *fsManager) Children(name string) ([]string, error) {
	rel, err := relName(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, loc := range m.locs {
		dir := filepath.Join(loc.mountpoint, rel)
		entries, err := m.fs.readDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, &FileError{Op: "read", Controller: loc.controller, Path: dir, Err: unwrapPathError(err)}
		}
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, "/"+path.Join(rel, e.Name()))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Destroy kills what is left, waits for it, and removes the cgroup.
func (m *fsManager) Destroy(ctx context.Context, name string) error {
	rel, err := nonRoot(name, "destroy")
	if err != nil {
		return err
	}
	if !m.present(rel) {
		return nil
	}
	if err := m.killAll(ctx, name, rel); err != nil {
		return err
	}
	var errs []error
	for _, loc := range m.locs {
		if err := m.removeTree(ctx, loc, filepath.Join(loc.mountpoint, rel)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killAll kills the processes of the cgroup and its descendants until none
// is left: through cgroup.kill where the kernel has it (cgroup v2 unified,
// Linux 5.14), SIGKILL to each process otherwise, again and again (a process may
// fork meanwhile) with a back-off from 1 ms to 100 ms.
func (m *fsManager) killAll(ctx context.Context, name, rel string) error {
	delay := time.Millisecond
	var killErr error
	for {
		pids, err := m.Pids(name)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			err := fmt.Errorf("cgroup: destroy %s: processes %v still running: %w", name, pids, context.Cause(ctx))
			return errors.Join(err, killErr)
		}
		// On a hybrid host the cgroup2 hierarchy need not hold every
		// process, so its cgroup.kill is not enough there.
		killed := m.v2 && m.fs.writeFile(filepath.Join(m.info.Unified, rel, "cgroup.kill"), "1") == nil
		if !killed {
			for _, pid := range pids {
				if err := m.fs.kill(pid); err != nil {
					killErr = fmt.Errorf("cgroup: kill process %d of %s: %w", pid, name, err)
				}
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// removeTree removes dir and the cgroups below it, children first,
// retrying a busy rmdir (a process that is still exiting) with a back-off.
func (m *fsManager) removeTree(ctx context.Context, loc location, dir string) error {
	entries, err := m.fs.readDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &FileError{Op: "read", Controller: loc.controller, Path: dir, Err: unwrapPathError(err)}
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := m.removeTree(ctx, loc, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	delay := time.Millisecond
	for tries := 0; ; tries++ {
		err := m.fs.rmdir(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || tries >= 10 {
			return &FileError{Op: "rmdir", Controller: loc.controller, Path: dir, Err: unwrapPathError(err)}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return &FileError{Op: "rmdir", Controller: loc.controller, Path: dir, Err: errors.Join(unwrapPathError(err), context.Cause(ctx))}
		case <-t.C:
		}
		delay *= 2
	}
}

func (m *fsManager) Config(name string) (*ResourceConfig, error) {
	rel, err := relName(name)
	if err != nil {
		return nil, err
	}
	var rc *ResourceConfig
	if m.v2 {
		rc, err = m.configV2(rel)
	} else {
		rc, err = m.configV1(rel)
	}
	if err != nil {
		return nil, err
	}
	if rc.HugePageLimits, err = m.configHugetlb(rel); err != nil {
		return nil, err
	}
	return rc, nil
}

func (m *fsManager) Stats(name string) (*Stats, error) {
	rel, err := relName(name)
	if err != nil {
		return nil, err
	}
	if m.v2 {
		return m.statsV2(rel)
	}
	return m.statsV1(rel)
}
