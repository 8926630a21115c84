package cgroup

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// enableControllers enables in parent's cgroup.subtree_control the managed
// controllers it offers and has not enabled yet, all at once, else one by
// one (a failure is left for the write of the controller's file to
// report, as runc does).
func (m *fsManager) enableControllers(parent string) error {
	avail, err := m.read("cgroup", parent, "cgroup.controllers")
	if err != nil {
		return err
	}
	cur, err := m.read("cgroup", parent, "cgroup.subtree_control")
	if err != nil {
		return err
	}
	var add []string
	for _, c := range m.v2Enable {
		if slices.Contains(strings.Fields(avail), c) && !slices.Contains(strings.Fields(cur), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := m.fs.writeFile(filepath.Join(parent, "cgroup.subtree_control"), strings.Join(add, " ")); err != nil {
		for _, a := range add {
			_ = m.fs.writeFile(filepath.Join(parent, "cgroup.subtree_control"), a)
		}
	}
	return nil
}

// needV2 checks that controller is enabled for dir.
func (m *fsManager) needV2(dir, controller string, enabled []string) error {
	if !slices.Contains(enabled, controller) {
		return &NotSupportedError{Controller: controller, Where: dir,
			Reason: "not enabled (cgroup.controllers: " + strings.Join(enabled, " ") + ")"}
	}
	return nil
}

// setV2 writes res as runc's cgroup v2 writers do: cpu.weight (converted
// from the shares), cpu.max ("$QUOTA $PERIOD", "max" for no quota),
// memory.max ("max" for -1), memory.min, pids.max.
func (m *fsManager) setV2(rel string, res *ResourceConfig) error {
	dir := filepath.Join(m.info.Unified, rel)
	ctl, err := m.read("cgroup", dir, "cgroup.controllers")
	if err != nil {
		return err
	}
	enabled := strings.Fields(ctl)
	cpuMax := FormatCPUMax(res.CPUQuota, res.CPUPeriod)
	if res.CPUShares != nil || cpuMax != "" {
		if err := m.needV2(dir, "cpu", enabled); err != nil {
			return err
		}
		if res.CPUShares != nil {
			if err := m.write("cpu", dir, "cpu.weight", strconv.FormatUint(CPUSharesToWeight(*res.CPUShares), 10)); err != nil {
				return err
			}
		}
		if cpuMax != "" {
			if err := m.write("cpu", dir, "cpu.max", cpuMax); err != nil {
				return err
			}
		}
	}
	if nonZero(res.Memory) || res.MemoryMin != nil {
		if err := m.needV2(dir, "memory", enabled); err != nil {
			return err
		}
		if res.MemoryMin != nil {
			if err := m.write("memory", dir, "memory.min", strconv.FormatInt(max(*res.MemoryMin, 0), 10)); err != nil {
				return err
			}
		}
		if nonZero(res.Memory) {
			v := "max"
			if *res.Memory > 0 {
				v = strconv.FormatInt(*res.Memory, 10)
			}
			if err := m.write("memory", dir, "memory.max", v); err != nil {
				return err
			}
		}
	}
	if nonZero(res.PidsLimit) {
		if err := m.needV2(dir, "pids", enabled); err != nil {
			return err
		}
		if err := m.write("pids", dir, "pids.max", pidsMax(*res.PidsLimit)); err != nil {
			return err
		}
	}
	return nil
}

func (m *fsManager) existsV2(rel string) bool {
	ctl, err := m.read("cgroup", filepath.Join(m.info.Unified, rel), "cgroup.controllers")
	if err != nil {
		return false
	}
	if rel == "" {
		return true
	}
	for _, c := range m.v2Enable {
		if !slices.Contains(strings.Fields(ctl), c) {
			return false
		}
	}
	return true
}

func (m *fsManager) configV2(rel string) (*ResourceConfig, error) {
	dir := filepath.Join(m.info.Unified, rel)
	rc := &ResourceConfig{}
	missing := func(err error) bool { return errors.Is(err, fs.ErrNotExist) }
	if w, err := m.readUint("cpu", dir, "cpu.weight"); err == nil {
		s := CPUWeightToShares(w)
		rc.CPUShares = &s
	} else if !missing(err) {
		return nil, err
	}
	if s, err := m.read("cpu", dir, "cpu.max"); err == nil {
		q, p, err := ParseCPUMax(s)
		if err != nil {
			return nil, &FileError{Op: "read", Controller: "cpu", Path: filepath.Join(dir, "cpu.max"), Err: err}
		}
		rc.CPUQuota = &q
		if p != 0 {
			rc.CPUPeriod = &p
		}
	} else if !missing(err) {
		return nil, err
	}
	for _, f := range []struct {
		controller, file string
		dst              **int64
	}{
		{"memory", "memory.max", &rc.Memory},
		{"memory", "memory.min", &rc.MemoryMin},
		{"pids", "pids.max", &rc.PidsLimit},
	} {
		s, err := m.read(f.controller, dir, f.file)
		if err != nil {
			if missing(err) {
				continue
			}
			return nil, err
		}
		v, err := parseInt64OrMax(s)
		if err != nil {
			return nil, &FileError{Op: "read", Controller: f.controller, Path: filepath.Join(dir, f.file), Err: err}
		}
		*f.dst = &v
	}
	return rc, nil
}

func (m *fsManager) statsV2(rel string) (*Stats, error) {
	dir := filepath.Join(m.info.Unified, rel)
	st := &Stats{}
	var err error
	if st.MemoryUsage, err = m.readUint("memory", dir, "memory.current"); err != nil {
		return nil, err
	}
	mem, err := m.readFlat("memory", dir, "memory.stat")
	if err != nil {
		return nil, err
	}
	st.MemoryWorkingSet = st.MemoryUsage - min(st.MemoryUsage, mem["inactive_file"])
	cpu, err := m.readFlat("cpu", dir, "cpu.stat")
	if err != nil {
		return nil, err
	}
	st.CPUUsage = time.Duration(cpu["usage_usec"]) * time.Microsecond
	return st, nil
}
