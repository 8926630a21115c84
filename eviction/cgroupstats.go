package eviction

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/stats"
)

// CgroupStats reads the stats from the host: memory from /proc/meminfo
// and the root cgroup's memory usage and statistics (cgroup v1 and v2),
// the node file system with statfs of NodeFsPath, process IDs from
// /proc/sys/kernel/pid_max and the number of tasks, and each active pod's
// working set and processes from its cgroup and its ephemeral storage
// from its log and emptyDir directories.
//
// With Summary (the stats package's Provider, shared with the node API's
// /stats/summary) the containers' figures, the pods' volumes and their
// ephemeral storage come from the summary; without, the containers'
// storage is their logs (ContainerLogDirs), the volumes are the emptyDirs
// (EmptyDirs), and the containers' memory is unknown (eviction messages
// then name no container). A value it cannot read is left unknown, never
// guessed.
type CgroupStats struct {
	// CgroupfsRoot is where the cgroup file systems are mounted. Defaults
	// to /sys/fs/cgroup.
	CgroupfsRoot string
	// PodCgroupRoot is the cgroup holding the pod cgroups (the agent's
	// Cgroups.Root, "/kubepods"); "" measures no pod cgroup.
	PodCgroupRoot string
	// NodeFsPath is a path on the node file system (the agent's root
	// directory). Required.
	NodeFsPath string
	// ImageFs reads the image file system, when it is apart from the
	// node's. Defaults to nil: the same.
	ImageFs func(ctx context.Context) (*FsStats, error)
	// PodDirs returns directories whose size counts in the pod's ephemeral
	// storage beyond EmptyDirs and ContainerLogDirs. Defaults to none.
	PodDirs func(pod *v1.Pod) []string
	// EmptyDirs returns the directories of the pod's emptyDir volumes on
	// disk by volume name: each is measured for its sizeLimit and counted
	// in the pod's ephemeral storage. Defaults to none.
	EmptyDirs func(pod *v1.Pod) map[string]string
	// ContainerLogDirs returns the log directory of each of the pod's
	// containers by name: measured as the container's ephemeral storage
	// and counted in the pod's. Defaults to none.
	ContainerLogDirs func(pod *v1.Pod) map[string]string
	// Summary, when set, gives the pods' containers, volumes and
	// ephemeral storage instead of the directories above (the pods'
	// memory and processes still come from their cgroups when known).
	// An error leaves the directories' figures. Defaults to nil.
	Summary func(ctx context.Context) (*statsapi.Summary, error)
	// DedicatedImageFs says the image file system is apart from the
	// node's: the containers' writable layers then do not count against
	// their ephemeral-storage limits (with Summary).
	DedicatedImageFs bool
	// Logger receives the summary's errors. Defaults to discarding.
	Logger logr.Logger
	// Pods lists the pods to measure. Defaults to none.
	Pods func() []*v1.Pod
	// ProcRoot defaults to /proc.
	ProcRoot string
	// MemoryCapacity and MemoryCgroup, both set, make memory.available
	// MemoryCapacity less the working set of the cgroup MemoryCgroup (in
	// cgroupfs form, such as the pod cgroup root "/kubepods") instead of
	// the host's memory less the root cgroup's: for an agent given a
	// share of a host whose other workloads are not its concern. Default
	// to the host's.
	MemoryCapacity uint64
	MemoryCgroup   string
}

// Stats implements StatsProvider.
func (c *CgroupStats) Stats(ctx context.Context) (*Stats, error) {
	if c.NodeFsPath == "" {
		return nil, errors.New("eviction: CgroupStats.NodeFsPath is required")
	}
	cgroot := c.CgroupfsRoot
	if cgroot == "" {
		cgroot = "/sys/fs/cgroup"
	}
	proc := c.ProcRoot
	if proc == "" {
		proc = "/proc"
	}
	s := &Stats{Pods: map[types.UID]PodStats{}}
	var errs []error
	readMem := func() (*MemoryStats, error) { return readMemory(proc, cgroot) }
	if c.MemoryCapacity > 0 && c.MemoryCgroup != "" {
		readMem = func() (*MemoryStats, error) { return readCgroupMemory(cgroot, c.MemoryCgroup, c.MemoryCapacity) }
	}
	if m, err := readMem(); err != nil {
		errs = append(errs, err)
	} else {
		s.Memory = m
	}
	if f, err := statfs(c.NodeFsPath); err != nil {
		errs = append(errs, err)
	} else {
		s.NodeFs = f
	}
	if c.ImageFs != nil {
		if f, err := c.ImageFs(ctx); err != nil {
			errs = append(errs, err)
		} else {
			s.ImageFs = f
		}
	}
	if p, err := readPIDs(proc); err != nil {
		errs = append(errs, err)
	} else {
		s.PIDs = p
	}
	if c.Pods != nil {
		v2 := !isDir(filepath.Join(cgroot, "memory"))
		var fromSummary map[types.UID]PodStats
		if c.Summary != nil {
			if sum, err := c.Summary(ctx); err != nil {
				c.Logger.V(2).Info("Eviction manager: no summary; measuring the pods' directories", "err", err.Error())
			} else {
				fromSummary = PodStatsFromSummary(sum, c.DedicatedImageFs)
			}
		}
		for _, pod := range c.Pods() {
			if ps, ok := fromSummary[pod.UID]; ok {
				s.Pods[pod.UID] = c.mergeCgroup(cgroot, v2, pod, ps)
				continue
			}
			s.Pods[pod.UID] = c.podStats(cgroot, v2, pod)
		}
	}
	// Only the node's own signals make an error: without them the manager
	// must not act. Missing pod stats leave those pods unmeasured.
	if s.Memory == nil && s.NodeFs == nil {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// readMemory is the kubelet's memory.available: MemTotal less the root
// cgroup's working set (usage less total_inactive_file).
func readMemory(proc, cgroot string) (*MemoryStats, error) {
	meminfo, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return nil, fmt.Errorf("eviction: reading meminfo: %w", err)
	}
	mi := parseMeminfo(meminfo)
	total, ok := mi["MemTotal"]
	if !ok || total == 0 {
		return nil, errors.New("eviction: no MemTotal in meminfo")
	}
	var usage, inactive uint64
	if v1dir := filepath.Join(cgroot, "memory"); isDir(v1dir) {
		usage, err = readUint(filepath.Join(v1dir, "memory.usage_in_bytes"))
		if err != nil {
			return nil, fmt.Errorf("eviction: reading the root cgroup's memory usage: %w", err)
		}
		st, err := readKeyed(filepath.Join(v1dir, "memory.stat"))
		if err != nil {
			return nil, fmt.Errorf("eviction: reading the root cgroup's memory.stat: %w", err)
		}
		inactive = st["total_inactive_file"]
	} else {
		// cgroup v2 has no usage file at the root: MemTotal less MemFree,
		// less the inactive file pages of the root's memory.stat.
		usage = total - mi["MemFree"]
		if st, err := readKeyed(filepath.Join(cgroot, "memory.stat")); err == nil {
			inactive = st["inactive_file"]
		} else {
			inactive = mi["Inactive(file)"]
		}
	}
	ws := usage
	if inactive < ws {
		ws -= inactive
	} else {
		ws = 0
	}
	avail := uint64(0)
	if ws < total {
		avail = total - ws
	}
	return &MemoryStats{Available: avail, Capacity: total, WorkingSet: ws, InactiveFile: usage - ws}, nil
}

// readCgroupMemory is memory.available of a memory budget: capacity less
// the working set of the cgroup name (usage less inactive file pages).
func readCgroupMemory(cgroot, name string, capacity uint64) (*MemoryStats, error) {
	dir, usageFile, inactiveKey := filepath.Join(cgroot, name), "memory.current", "inactive_file"
	if v1dir := filepath.Join(cgroot, "memory"); isDir(v1dir) {
		dir, usageFile, inactiveKey = filepath.Join(v1dir, name), "memory.usage_in_bytes", "total_inactive_file"
	}
	usage, err := readUint(filepath.Join(dir, usageFile))
	if err != nil {
		return nil, fmt.Errorf("eviction: reading the memory usage of %s: %w", name, err)
	}
	st, err := readKeyed(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return nil, fmt.Errorf("eviction: reading the memory.stat of %s: %w", name, err)
	}
	ws := usage - min(usage, st[inactiveKey])
	return &MemoryStats{Available: capacity - min(capacity, ws), Capacity: capacity, WorkingSet: ws, InactiveFile: usage - ws}, nil
}

// parseMeminfo reads /proc/meminfo in bytes.
func parseMeminfo(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		out[k] = n
	}
	return out
}

func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, fmt.Errorf("%s: no limit", p)
	}
	return strconv.ParseUint(s, 10, 64)
}

// readKeyed reads a flat keyed file ("key value" lines).
func readKeyed(p string) (map[string]uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = n
		}
	}
	return out, nil
}

func statfs(path string) (*FsStats, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("eviction: statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return &FsStats{AvailableBytes: st.Bavail * bs, CapacityBytes: st.Blocks * bs, InodesFree: st.Ffree, Inodes: st.Files}, nil
}

// readPIDs is the kubelet's pid.available: the lower of pid_max and
// threads-max, less the number of tasks.
func readPIDs(proc string) (*PIDStats, error) {
	max, err := readUint(filepath.Join(proc, "sys", "kernel", "pid_max"))
	if err != nil {
		return nil, fmt.Errorf("eviction: reading pid_max: %w", err)
	}
	if tm, err := readUint(filepath.Join(proc, "sys", "kernel", "threads-max")); err == nil && tm < max {
		max = tm
	}
	// /proc/loadavg's fourth field is running/total tasks.
	b, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return nil, fmt.Errorf("eviction: reading loadavg: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return nil, errors.New("eviction: malformed loadavg")
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseUint(total, 10, 64)
	if !ok || err != nil {
		return nil, fmt.Errorf("eviction: malformed loadavg tasks %q", f[3])
	}
	avail := uint64(0)
	if n < max {
		avail = max - n
	}
	return &PIDStats{Available: avail, Capacity: max}, nil
}

// podCgroup is the pod's cgroup under root, the cgroup package's layout.
func podCgroup(root string, pod *v1.Pod) string {
	p := root
	switch podmodel.QOSClass(pod) {
	case v1.PodQOSBurstable:
		p += "/burstable"
	case v1.PodQOSBestEffort:
		p += "/besteffort"
	}
	return p + "/pod" + string(pod.UID)
}

// mergeCgroup is the summary's figures with the pod's memory and
// processes from its cgroup where read.
func (c *CgroupStats) mergeCgroup(cgroot string, v2 bool, pod *v1.Pod, ps PodStats) PodStats {
	var cg PodStats
	c.cgroupFigures(&cg, cgroot, v2, pod)
	if cg.MemoryWorkingSet != nil {
		ps.MemoryWorkingSet = cg.MemoryWorkingSet
	}
	if cg.Processes != nil {
		ps.Processes = cg.Processes
	}
	return ps
}

func (c *CgroupStats) podStats(cgroot string, v2 bool, pod *v1.Pod) PodStats {
	var ps PodStats
	c.cgroupFigures(&ps, cgroot, v2, pod)
	var bytes, inodes uint64
	measured := false
	measure := func(d string) (uint64, bool) {
		b, n, err := stats.DiskUsage(d)
		if err != nil && !errors.Is(err, stats.ErrTooManyEntries) {
			return 0, false
		}
		measured = true
		bytes += b
		inodes += n
		return b, true
	}
	if c.PodDirs != nil {
		for _, d := range c.PodDirs(pod) {
			measure(d)
		}
	}
	if c.EmptyDirs != nil {
		for name, d := range c.EmptyDirs(pod) {
			if b, ok := measure(d); ok {
				if ps.Volumes == nil {
					ps.Volumes = map[string]uint64{}
				}
				ps.Volumes[name] = b
			}
		}
	}
	if c.ContainerLogDirs != nil {
		for name, d := range c.ContainerLogDirs(pod) {
			if b, ok := measure(d); ok {
				if ps.Containers == nil {
					ps.Containers = map[string]ContainerStats{}
				}
				ps.Containers[name] = ContainerStats{EphemeralStorage: u64(b)}
			}
		}
	}
	if measured {
		ps.EphemeralStorage, ps.Inodes = &bytes, &inodes
	}
	return ps
}

// cgroupFigures reads the pod's working set and processes from its cgroup.
func (c *CgroupStats) cgroupFigures(ps *PodStats, cgroot string, v2 bool, pod *v1.Pod) {
	if c.PodCgroupRoot != "" {
		cg := podCgroup(c.PodCgroupRoot, pod)
		if v2 {
			dir := filepath.Join(cgroot, cg)
			if u, err := readUint(filepath.Join(dir, "memory.current")); err == nil {
				st, _ := readKeyed(filepath.Join(dir, "memory.stat"))
				ws := u - min(u, st["inactive_file"])
				ps.MemoryWorkingSet = &ws
			}
			if n, err := readUint(filepath.Join(dir, "pids.current")); err == nil {
				ps.Processes = &n
			}
		} else {
			dir := filepath.Join(cgroot, "memory", cg)
			if u, err := readUint(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
				st, _ := readKeyed(filepath.Join(dir, "memory.stat"))
				ws := u - min(u, st["total_inactive_file"])
				ps.MemoryWorkingSet = &ws
			}
			if n, err := readUint(filepath.Join(cgroot, "pids", cg, "pids.current")); err == nil {
				ps.Processes = &n
			}
		}
	}

}
