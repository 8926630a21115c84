package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/cgroup"
)

// HostNode reads the host's figures: /proc/stat, /proc/meminfo, the root
// memory cgroup, and the file system at RootDir.
type HostNode struct {
	// RootDir defaults to "/".
	RootDir string
	// Proc is the proc file system's mount point. Defaults to /proc.
	Proc string
	// Cgroup is the cgroup file system's mount point, whose root memory
	// cgroup (cgroup v1 memory/) gives the node's memory usage. Defaults
	// to /sys/fs/cgroup.
	Cgroup string
}

var (
	_ MemoryUsageReader = HostNode{}
	_ RlimitReader      = HostNode{}
)

func (h HostNode) cgroup() string {
	if h.Cgroup == "" {
		return "/sys/fs/cgroup"
	}
	return h.Cgroup
}

// MemoryUsage implements MemoryUsageReader as the kubelet (cAdvisor) reads
// the root cgroup: on cgroup v1 the root memory cgroup's
// memory.usage_in_bytes, less total_inactive_file of its memory.stat; on
// cgroup v2, whose root cgroup has no memory.current, MemTotal − MemFree
// of /proc/meminfo less its Inactive(file), as runc computes the root's
// usage there.
func (h HostNode) MemoryUsage() (usage, workingSet uint64, err error) {
	dir := filepath.Join(h.cgroup(), "memory")
	if data, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
		usage, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("stats: root memory.usage_in_bytes: %w", err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return 0, 0, fmt.Errorf("stats: %w", err)
		}
		kv, err := cgroup.ParseFlatKeyed(data)
		if err != nil {
			return 0, 0, fmt.Errorf("stats: root memory.stat: %w", err)
		}
		return usage, usage - min(usage, kv["total_inactive_file"]), nil
	}
	data, err := os.ReadFile(h.proc() + "/meminfo")
	if err != nil {
		return 0, 0, err
	}
	m, err := meminfoFields(data, "MemTotal", "MemFree", "Inactive(file)")
	if err != nil {
		return 0, 0, err
	}
	usage = m[0] - min(m[0], m[1])
	return usage, usage - min(usage, m[2]), nil
}

// meminfoFields returns the named fields of /proc/meminfo, in bytes.
func meminfoFields(data []byte, names ...string) ([]uint64, error) {
	out := make([]uint64, len(names))
	found := 0
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		i := slices.Index(names, k)
		if i < 0 {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stats: /proc/meminfo %s: %w", k, err)
		}
		out[i] = n * 1024
		found++
	}
	if found != len(names) {
		return nil, fmt.Errorf("stats: /proc/meminfo lacks one of %v", names)
	}
	return out, nil
}

// Rlimit implements RlimitReader: /proc/sys/kernel/pid_max and the number
// of processes sysinfo(2) counts, as the kubelet's rlimit stats.
func (h HostNode) Rlimit() (maxPID, processes int64, err error) {
	data, err := os.ReadFile(h.proc() + "/sys/kernel/pid_max")
	if err != nil {
		return 0, 0, err
	}
	maxPID, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stats: pid_max: %w", err)
	}
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0, 0, fmt.Errorf("stats: sysinfo: %w", err)
	}
	return maxPID, int64(info.Procs), nil
}

// userHZ is the kernel's clock tick for /proc/stat (USER_HZ), 100 on
// every Linux architecture nodekit builds for.
const userHZ = 100

func (h HostNode) proc() string {
	if h.Proc == "" {
		return "/proc"
	}
	return h.Proc
}

// CPU implements NodeReader: user, nice, system, irq, softirq and steal
// time of the "cpu" line of /proc/stat.
func (h HostNode) CPU() (uint64, error) {
	data, err := os.ReadFile(h.proc() + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(data)
}

func parseProcStatCPU(data []byte) (uint64, error) {
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("stats: /proc/stat: no cpu line")
	}
	var total uint64
	// user nice system idle iowait irq softirq steal
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stats: /proc/stat: %w", err)
		}
		total += v
	}
	return total * (1e9 / userHZ), nil
}

// Memory implements NodeReader from /proc/meminfo.
func (h HostNode) Memory() (total, available, free uint64, err error) {
	f, err := os.Open(h.proc() + "/meminfo")
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	return parseMeminfo(f)
}

func parseMeminfo(f interface{ Read([]byte) (int, error) }) (total, available, free uint64, err error) {
	found := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "MemTotal":
			dst = &total
		case "MemAvailable":
			dst = &available
		case "MemFree":
			dst = &free
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("stats: /proc/meminfo %s: %w", k, err)
		}
		*dst = n * 1024
		found++
	}
	if err := s.Err(); err != nil {
		return 0, 0, 0, err
	}
	if found != 3 {
		return 0, 0, 0, errors.New("stats: /proc/meminfo lacks MemTotal, MemAvailable or MemFree")
	}
	return total, available, free, nil
}

// Fs implements NodeReader with statfs(2).
func (h HostNode) Fs() (capacity, available, used, inodes, inodesFree uint64, err error) {
	root := h.RootDir
	if root == "" {
		root = "/"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, 0, 0, 0, 0, fmt.Errorf("stats: statfs %s: %w", root, err)
	}
	bs := uint64(st.Bsize)
	return st.Blocks * bs, st.Bavail * bs, (st.Blocks - st.Bfree) * bs, st.Files, st.Ffree, nil
}

// BootTime implements NodeReader from the btime line of /proc/stat.
func (h HostNode) BootTime() (time.Time, error) {
	data, err := os.ReadFile(h.proc() + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("stats: /proc/stat btime: %w", err)
			}
			return time.Unix(s, 0), nil
		}
	}
	return time.Time{}, errors.New("stats: /proc/stat has no btime")
}
