package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// v1Required are the controllers in whose hierarchies a cgroup must exist
// for Exists (those mounted among them).
var v1Required = []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}

// controllerDir is rel in the v1 hierarchy holding controller.
func (m *fsManager) controllerDir(controller, rel string) (string, error) {
	mp, ok := m.info.Mountpoint(controller)
	if !ok {
		return "", &NotSupportedError{Controller: controller, Where: m.info.Root, Reason: "not mounted"}
	}
	return filepath.Join(mp, rel), nil
}

// ensureCpuset gives every level of rel that has none its parent's
// cpuset.cpus and cpuset.mems: a new cpuset cgroup starts empty (unless
// cgroup.clone_children) and refuses processes until they are set.
func (m *fsManager) ensureCpuset(loc location, rel string) error {
	cur := loc.mountpoint
	for _, part := range strings.Split(rel, "/") {
		parent := cur
		cur = filepath.Join(cur, part)
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := m.read("cpuset", cur, file)
			if err != nil {
				return err
			}
			if v != "" {
				continue
			}
			pv, err := m.read("cpuset", parent, file)
			if err != nil {
				return err
			}
			if err := m.write("cpuset", cur, file, pv); err != nil {
				return err
			}
		}
	}
	return nil
}

func nonZero(p *int64) bool   { return p != nil && *p != 0 }
func nonZeroU(p *uint64) bool { return p != nil && *p != 0 }

// setV1 writes res as runc's cgroup v1 writers do: cpu.shares (read back to
// catch the kernel's clamping), cpu.cfs_period_us and cpu.cfs_quota_us
// (the period again after the quota when the kernel refused it first),
// memory.limit_in_bytes, pids.max.
func (m *fsManager) setV1(rel string, res *ResourceConfig) error {
	if res.CPUShares != nil || nonZero(res.CPUQuota) || nonZeroU(res.CPUPeriod) {
		dir, err := m.controllerDir("cpu", rel)
		if err != nil {
			return err
		}
		if res.CPUShares != nil {
			v := strconv.FormatUint(*res.CPUShares, 10)
			if err := m.write("cpu", dir, "cpu.shares", v); err != nil {
				return err
			}
			got, err := m.readUint("cpu", dir, "cpu.shares")
			if err != nil {
				return err
			}
			if got != *res.CPUShares {
				return &FileError{Op: "write", Controller: "cpu", Path: filepath.Join(dir, "cpu.shares"), Value: v,
					Err: fmt.Errorf("the kernel keeps %d", got)}
			}
		}
		period := ""
		if nonZeroU(res.CPUPeriod) {
			period = strconv.FormatUint(*res.CPUPeriod, 10)
			if err := m.write("cpu", dir, "cpu.cfs_period_us", period); err != nil {
				// A period shorter than the current one can be refused
				// (old quota / new period above the parent's); retry it
				// after the quota.
				if !errors.Is(err, syscall.EINVAL) || !nonZero(res.CPUQuota) {
					return err
				}
			} else {
				period = ""
			}
		}
		if nonZero(res.CPUQuota) {
			if err := m.write("cpu", dir, "cpu.cfs_quota_us", strconv.FormatInt(*res.CPUQuota, 10)); err != nil {
				return err
			}
			if period != "" {
				if err := m.write("cpu", dir, "cpu.cfs_period_us", period); err != nil {
					return err
				}
			}
		}
	}
	if nonZero(res.Memory) {
		dir, err := m.controllerDir("memory", rel)
		if err != nil {
			return err
		}
		if err := m.write("memory", dir, "memory.limit_in_bytes", strconv.FormatInt(*res.Memory, 10)); err != nil {
			var fe *FileError
			if errors.Is(err, syscall.EBUSY) && errors.As(err, &fe) {
				if usage, uerr := m.readUint("memory", dir, "memory.usage_in_bytes"); uerr == nil {
					fe.Err = fmt.Errorf("%w (usage %d bytes is above the limit)", fe.Err, usage)
				}
			}
			return err
		}
	}
	if nonZero(res.PidsLimit) {
		dir, err := m.controllerDir("pids", rel)
		if err != nil {
			return err
		}
		if err := m.write("pids", dir, "pids.max", pidsMax(*res.PidsLimit)); err != nil {
			return err
		}
	}
	return nil
}

func pidsMax(limit int64) string {
	if limit < 0 {
		return "max"
	}
	return strconv.FormatInt(limit, 10)
}

func (m *fsManager) existsV1(rel string) bool {
	checked := false
	for _, c := range v1Required {
		dir, err := m.controllerDir(c, rel)
		if err != nil {
			continue
		}
		checked = true
		if !m.exists(dir) {
			return false
		}
	}
	return checked
}

// v1UnlimitedAbove: cgroup v1 shows "no limit" as a huge number (the
// largest page count times the page size); anything above this is -1.
const v1UnlimitedAbove = 1 << 62

func (m *fsManager) configV1(rel string) (*ResourceConfig, error) {
	rc := &ResourceConfig{}
	opt := func(err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if dir, err := m.controllerDir("cpu", rel); err == nil {
		if v, err := m.readUint("cpu", dir, "cpu.shares"); err == nil {
			rc.CPUShares = &v
		} else if opt(err) != nil {
			return nil, err
		}
		if s, err := m.read("cpu", dir, "cpu.cfs_quota_us"); err == nil {
			q, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, &FileError{Op: "read", Controller: "cpu", Path: filepath.Join(dir, "cpu.cfs_quota_us"), Err: err}
			}
			rc.CPUQuota = &q
		} else if opt(err) != nil {
			return nil, err
		}
		if v, err := m.readUint("cpu", dir, "cpu.cfs_period_us"); err == nil {
			rc.CPUPeriod = &v
		} else if opt(err) != nil {
			return nil, err
		}
	}
	if dir, err := m.controllerDir("memory", rel); err == nil {
		if v, err := m.readUint("memory", dir, "memory.limit_in_bytes"); err == nil {
			l := int64(-1)
			if v < v1UnlimitedAbove {
				l = int64(v)
			}
			rc.Memory = &l
		} else if opt(err) != nil {
			return nil, err
		}
	}
	if dir, err := m.controllerDir("pids", rel); err == nil {
		if s, err := m.read("pids", dir, "pids.max"); err == nil {
			v, err := parseInt64OrMax(s)
			if err != nil {
				return nil, &FileError{Op: "read", Controller: "pids", Path: filepath.Join(dir, "pids.max"), Err: err}
			}
			rc.PidsLimit = &v
		} else if opt(err) != nil {
			return nil, err
		}
	}
	return rc, nil
}

func (m *fsManager) statsV1(rel string) (*Stats, error) {
	st := &Stats{}
	dir, err := m.controllerDir("memory", rel)
	if err != nil {
		return nil, err
	}
	if st.MemoryUsage, err = m.readUint("memory", dir, "memory.usage_in_bytes"); err != nil {
		return nil, err
	}
	stat, err := m.readFlat("memory", dir, "memory.stat")
	if err != nil {
		return nil, err
	}
	st.MemoryWorkingSet = st.MemoryUsage - min(st.MemoryUsage, stat["total_inactive_file"])
	if dir, err := m.controllerDir("cpuacct", rel); err == nil {
		ns, err := m.readUint("cpuacct", dir, "cpuacct.usage")
		if err != nil {
			return nil, err
		}
		st.CPUUsage = time.Duration(ns)
	}
	return st, nil
}

func (m *fsManager) readFlat(controller, dir, file string) (map[string]uint64, error) {
	s, err := m.read(controller, dir, file)
	if err != nil {
		return nil, err
	}
	kv, err := ParseFlatKeyed([]byte(s))
	if err != nil {
		return nil, &FileError{Op: "read", Controller: controller, Path: filepath.Join(dir, file), Err: err}
	}
	return kv, nil
}
