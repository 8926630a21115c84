package stats

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/cgroup"
)

// Runtime is the part of the CRI the summary reads. CRIClient adapts a
// CRI gRPC client.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// NodeReader reads the node's own figures. The zero Options use the host's
// (/proc and the file system at RootDir).
type NodeReader interface {
	// CPU returns the node's cumulative CPU time in core-nanoseconds.
	CPU() (uint64, error)
	// Memory returns the node's total, available and free memory bytes.
	Memory() (total, available, free uint64, err error)
	// Fs returns the file system's capacity, available and used bytes
	// and inodes, total and free.
	Fs() (capacity, available, used, inodes, inodesFree uint64, err error)
	// BootTime is when the node started.
	BootTime() (time.Time, error)
}

// MemoryUsageReader is a NodeReader that also reads the node's memory
// usage and working set as the kubelet reports them (the root cgroup's
// usage, less its inactive file pages). HostNode is one. Without it the
// node's working set is total less available memory.
type MemoryUsageReader interface {
	MemoryUsage() (usage, workingSet uint64, err error)
}

// RlimitReader is a NodeReader that also reads the node's process limit
// and count, the summary's node rlimit. HostNode is one.
type RlimitReader interface {
	Rlimit() (maxPID, processes int64, err error)
}

// CgroupReader reads a cgroup's usage by name (a cgroup.Manager, or a
// cgroup.PodManager).
type CgroupReader interface {
	Stats(name string) (*cgroup.Stats, error)
}

// Options configure a Provider.
type Options struct {
	// NodeName is the summary's node name. Required.
	NodeName string
	// Runtime gives the pods' and containers' figures. Required.
	Runtime Runtime
	// Node reads the node's figures. Defaults to the host's, with the
	// file system at RootDir.
	Node NodeReader
	// RootDir is the file system whose figures are the node's fs.
	// Defaults to "/".
	RootDir string
	// ContainerLogDir names a container's log directory (the runtime
	// manager's <PodLogsDir>/<namespace>_<name>_<uid>/<container>): its
	// size is the container's logs figures, counted in the pod's ephemeral
	// storage. Defaults to nil: no logs figures.
	ContainerLogDir func(pod statsapi.PodReference, container string) string
	// PodVolumes names the directories of a pod's ephemeral volumes
	// (emptyDirs on disk) by volume name: their sizes are the pod's
	// VolumeStats, counted in its ephemeral storage. Defaults to nil: no
	// volume figures.
	PodVolumes func(pod statsapi.PodReference) map[string]string
	// DiskUsagePeriod is how long a directory's measured size is reused
	// before it is walked again (the kubelet's volume stats period is 1m).
	// Defaults to 10s.
	DiskUsagePeriod time.Duration
	// Cgroups, with ContainerCgroup, gives the CPU and memory of the
	// containers the runtime has no figures for (a runtime without
	// ListContainerStats, or a container it leaves out) from their
	// cgroups. Defaults to nil: such containers show no CPU or memory.
	Cgroups CgroupReader
	// ContainerCgroup names a container's cgroup for Cgroups ("" for
	// unknown): with the cgroupfs driver, the pod's cgroup joined with
	// the container's ID.
	ContainerCgroup func(pod statsapi.PodReference, containerID string) string
	// SystemContainers name the cgroups of the node's system containers
	// by their summary names (statsapi.SystemContainerKubelet "kubelet"
	// for the agent's own cgroup, SystemContainerRuntime,
	// SystemContainerPods "pods" for the cgroup holding the pods,
	// SystemContainerMisc): their CPU and memory, read through Cgroups,
	// are the node's systemContainers. Defaults to nil: none.
	SystemContainers map[string]string
	// ImageFs gives the node's image file system figures (the summary's
	// node runtime.imageFs and runtime.containerFs, one file system).
	// Defaults to nil: none.
	ImageFs func(ctx context.Context) (*statsapi.FsStats, error)
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Logger defaults to discarding.
	Logger logr.Logger
}

// Provider computes summaries. Create it with New.
type Provider struct {
	opts Options
	log  logr.Logger

	mu      sync.Mutex
	prevCPU *cpuSample
	// noSandboxStats is set once the runtime said it has no
	// ListPodSandboxStats; noContainerStats the same of
	// ListContainerStats.
	noSandboxStats, noContainerStats bool
	// prevContainerCPU are the containers' last CPU samples read from
	// cgroups, by container ID, for their usageNanoCores.
	prevContainerCPU map[string]cpuSample

	disk diskCache
}

type cpuSample struct {
	t     time.Time
	usage uint64
}

// New returns a Provider for opts. It does no I/O.
func New(opts Options) (*Provider, error) {
	if opts.NodeName == "" {
		return nil, errors.New("stats: NodeName is required")
	}
	if opts.Runtime == nil {
		return nil, errors.New("stats: Runtime is required")
	}
	if opts.RootDir == "" {
		opts.RootDir = "/"
	}
	if opts.Node == nil {
		opts.Node = HostNode{RootDir: opts.RootDir}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.DiskUsagePeriod < 0 {
		return nil, errors.New("stats: negative DiskUsagePeriod")
	}
	if opts.DiskUsagePeriod == 0 {
		opts.DiskUsagePeriod = 10 * time.Second
	}
	return &Provider{opts: opts, log: opts.Logger.WithName("stats")}, nil
}

func u64(v uint64) *uint64 { return &v }

// Summary returns the node's summary; with onlyCPUAndMemory, only the CPU
// and memory figures (the kubelet's GetCPUAndMemoryStats). A node figure
// that cannot be read is left out and logged; a runtime error fails the
// summary.
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	now := p.opts.Clock.Now()
	pods, err := p.podStats(ctx, onlyCPUAndMemory)
	if err != nil {
		return nil, err
	}
	n := p.nodeStats(now, onlyCPUAndMemory)
	n.SystemContainers = p.systemContainers(now)
	if !onlyCPUAndMemory && p.opts.ImageFs != nil {
		if fs, err := p.opts.ImageFs(ctx); err != nil {
			p.log.V(2).Info("Cannot read the image file system", "err", err.Error())
		} else if fs != nil {
			cfs := *fs
			n.Runtime = &statsapi.RuntimeStats{ImageFs: fs, ContainerFs: &cfs}
		}
	}
	return &statsapi.Summary{Node: n, Pods: pods}, nil
}

// systemContainers are the figures of Options.SystemContainers, sorted by
// name; a cgroup that cannot be read is left out.
func (p *Provider) systemContainers(now time.Time) []statsapi.ContainerStats {
	if p.opts.Cgroups == nil || len(p.opts.SystemContainers) == 0 {
		return nil
	}
	names := make([]string, 0, len(p.opts.SystemContainers))
	for name := range p.opts.SystemContainers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []statsapi.ContainerStats
	for _, name := range names {
		cs := statsapi.ContainerStats{Name: name}
		// Keyed apart from container IDs, and kept across summaries.
		p.cgroupStats(&cs, p.opts.SystemContainers[name], "system:"+name, now, nil)
		if cs.CPU == nil {
			continue
		}
		out = append(out, cs)
	}
	return out
}

func (p *Provider) nodeStats(now time.Time, onlyCPUAndMemory bool) statsapi.NodeStats {
	t := metav1.NewTime(now)
	n := statsapi.NodeStats{NodeName: p.opts.NodeName}
	if boot, err := p.opts.Node.BootTime(); err == nil {
		n.StartTime = metav1.NewTime(boot)
	}
	if usage, err := p.opts.Node.CPU(); err != nil {
		p.log.V(2).Info("Cannot read the node's CPU time", "err", err.Error())
	} else {
		n.CPU = &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: u64(usage)}
		p.mu.Lock()
		if prev := p.prevCPU; prev != nil && now.After(prev.t) && usage >= prev.usage {
			n.CPU.UsageNanoCores = u64(uint64(float64(usage-prev.usage) / now.Sub(prev.t).Seconds()))
		}
		p.prevCPU = &cpuSample{t: now, usage: usage}
		p.mu.Unlock()
	}
	if total, avail, free, err := p.opts.Node.Memory(); err != nil {
		p.log.V(2).Info("Cannot read the node's memory", "err", err.Error())
	} else {
		n.Memory = &statsapi.MemoryStats{
			Time:            t,
			AvailableBytes:  u64(avail),
			UsageBytes:      u64(total - free),
			WorkingSetBytes: u64(total - avail),
		}
		if mr, ok := p.opts.Node.(MemoryUsageReader); ok {
			if usage, ws, err := mr.MemoryUsage(); err != nil {
				p.log.V(2).Info("Cannot read the node's memory usage", "err", err.Error())
			} else {
				// The kubelet's: available is capacity less the working set.
				n.Memory.UsageBytes, n.Memory.WorkingSetBytes = u64(usage), u64(ws)
				n.Memory.AvailableBytes = u64(total - min(total, ws))
			}
		}
	}
	if onlyCPUAndMemory {
		return n
	}
	if rr, ok := p.opts.Node.(RlimitReader); ok {
		if maxPID, procs, err := rr.Rlimit(); err != nil {
			p.log.V(2).Info("Cannot read the node's process limit", "err", err.Error())
		} else {
			n.Rlimit = &statsapi.RlimitStats{Time: t, MaxPID: &maxPID, NumOfRunningProcesses: &procs}
		}
	}
	if capacity, avail, used, inodes, inodesFree, err := p.opts.Node.Fs(); err != nil {
		p.log.V(2).Info("Cannot read the node's file system", "err", err.Error())
	} else {
		n.Fs = &statsapi.FsStats{Time: t, CapacityBytes: u64(capacity), AvailableBytes: u64(avail), UsedBytes: u64(used),
			Inodes: u64(inodes), InodesFree: u64(inodesFree), InodesUsed: u64(inodes - inodesFree)}
	}
	return n
}

func isUnimplemented(err error) bool {
	if status.Code(err) == codes.Unimplemented {
		return true
	}
	var u interface{ Unimplemented() bool }
	return errors.As(err, &u) && u.Unimplemented()
}

// podStats returns the stats of the pods with a ready sandbox, sorted by
// namespace and name.
func (p *Provider) podStats(ctx context.Context, onlyCPUAndMemory bool) ([]statsapi.PodStats, error) {
	sandboxes, err := p.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, fmt.Errorf("stats: listing pod sandboxes: %w", err)
	}
	containers, err := p.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("stats: listing containers: %w", err)
	}
	containers = latestContainers(containers)
	p.mu.Lock()
	trySandbox := !p.noSandboxStats
	p.mu.Unlock()
	var sbStats map[string]*runtimeapi.PodSandboxStats
	if trySandbox {
		list, err := p.opts.Runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
		switch {
		case isUnimplemented(err):
			p.mu.Lock()
			p.noSandboxStats = true
			p.mu.Unlock()
			p.log.V(1).Info("The runtime has no pod sandbox stats: summing container stats")
		case err != nil:
			return nil, fmt.Errorf("stats: pod sandbox stats: %w", err)
		default:
			sbStats = make(map[string]*runtimeapi.PodSandboxStats, len(list))
			for _, s := range list {
				sbStats[s.GetAttributes().GetId()] = s
			}
		}
	}
	ctrStats := map[string]*runtimeapi.ContainerStats{}
	p.mu.Lock()
	tryContainers := !p.noContainerStats
	p.mu.Unlock()
	if sbStats == nil && tryContainers {
		list, err := p.opts.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
		switch {
		case isUnimplemented(err):
			p.mu.Lock()
			p.noContainerStats = true
			p.mu.Unlock()
			p.log.V(1).Info("The runtime has no container stats: reading the containers' cgroups where known")
		case err != nil:
			return nil, fmt.Errorf("stats: container stats: %w", err)
		}
		for _, s := range list {
			ctrStats[s.GetAttributes().GetId()] = s
		}
	} else if sbStats != nil {
		for _, s := range sbStats {
			for _, c := range s.GetLinux().GetContainers() {
				ctrStats[c.GetAttributes().GetId()] = c
			}
		}
	}
	bySandbox := map[string][]*runtimeapi.Container{}
	for _, c := range containers {
		bySandbox[c.GetPodSandboxId()] = append(bySandbox[c.GetPodSandboxId()], c)
	}
	// One sandbox per pod: the newest, when a pod has two ready.
	newest := map[string]*runtimeapi.PodSandbox{}
	for _, s := range sandboxes {
		uid := s.GetMetadata().GetUid()
		if cur, ok := newest[uid]; !ok || s.GetCreatedAt() > cur.GetCreatedAt() {
			newest[uid] = s
		}
	}
	now := p.opts.Clock.Now()
	seenCPU := map[string]bool{}
	out := make([]statsapi.PodStats, 0, len(newest))
	for _, s := range newest {
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: s.GetMetadata().GetName(), Namespace: s.GetMetadata().GetNamespace(), UID: s.GetMetadata().GetUid()},
			StartTime:  metav1.NewTime(time.Unix(0, s.GetCreatedAt())),
			Containers: []statsapi.ContainerStats{},
		}
		ctrs := bySandbox[s.GetId()]
		sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].GetMetadata().GetName() < ctrs[j].GetMetadata().GetName() })
		for _, c := range ctrs {
			cs := statsapi.ContainerStats{Name: c.GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt()))}
			if st := ctrStats[c.GetId()]; st != nil {
				cs.CPU = cpuStats(st.GetCpu())
				cs.Memory = memoryStats(st.GetMemory())
				if !onlyCPUAndMemory {
					cs.Rootfs = fsStats(st.GetWritableLayer())
				}
			}
			if cs.CPU == nil || cs.Memory == nil {
				p.containerCgroupStats(&cs, ps.PodRef, c.GetId(), now, seenCPU)
			}
			if !onlyCPUAndMemory && p.opts.ContainerLogDir != nil {
				cs.Logs = p.dirStats(p.opts.ContainerLogDir(ps.PodRef, cs.Name), now)
			}
			ps.Containers = append(ps.Containers, cs)
		}
		if !onlyCPUAndMemory && p.opts.PodVolumes != nil {
			ps.VolumeStats = p.volumeStats(p.opts.PodVolumes(ps.PodRef), now)
		}
		if sb := sbStats[s.GetId()]; sb != nil {
			l := sb.GetLinux()
			ps.CPU = cpuStats(l.GetCpu())
			ps.Memory = memoryStats(l.GetMemory())
			if !onlyCPUAndMemory {
				ps.Network = networkStats(l.GetNetwork(), now)
				if pr := l.GetProcess(); pr != nil && pr.GetProcessCount() != nil {
					ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64(pr.GetProcessCount().GetValue())}
				}
			}
		} else {
			ps.CPU, ps.Memory = sumContainers(ps.Containers)
		}
		if !onlyCPUAndMemory {
			ps.EphemeralStorage = ephemeralStorage(ps.Containers, ps.VolumeStats)
		}
		out = append(out, ps)
	}
	p.mu.Lock()
	for id := range p.prevContainerCPU {
		if !seenCPU[id] && !strings.HasPrefix(id, "system:") {
			delete(p.prevContainerCPU, id)
		}
	}
	p.mu.Unlock()
	if !onlyCPUAndMemory {
		p.disk.prune(now, p.opts.DiskUsagePeriod)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PodRef.Namespace != out[j].PodRef.Namespace {
			return out[i].PodRef.Namespace < out[j].PodRef.Namespace
		}
		return out[i].PodRef.Name < out[j].PodRef.Name
	})
	return out, nil
}

func cpuStats(c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	s := &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, c.GetTimestamp()))}
	if v := c.GetUsageCoreNanoSeconds(); v != nil {
		s.UsageCoreNanoSeconds = u64(v.GetValue())
	}
	if v := c.GetUsageNanoCores(); v != nil {
		s.UsageNanoCores = u64(v.GetValue())
	}
	return s
}

func memoryStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	s := &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.GetTimestamp()))}
	set := func(dst **uint64, v *runtimeapi.UInt64Value) {
		if v != nil {
			*dst = u64(v.GetValue())
		}
	}
	set(&s.WorkingSetBytes, m.GetWorkingSetBytes())
	set(&s.AvailableBytes, m.GetAvailableBytes())
	set(&s.UsageBytes, m.GetUsageBytes())
	set(&s.RSSBytes, m.GetRssBytes())
	set(&s.PageFaults, m.GetPageFaults())
	set(&s.MajorPageFaults, m.GetMajorPageFaults())
	return s
}

func fsStats(f *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	if f == nil {
		return nil
	}
	s := &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, f.GetTimestamp()))}
	if v := f.GetUsedBytes(); v != nil {
		s.UsedBytes = u64(v.GetValue())
	}
	if v := f.GetInodesUsed(); v != nil {
		s.InodesUsed = u64(v.GetValue())
	}
	return s
}

// networkStats are the sandbox's network figures; a runtime that gives
// them no timestamp (containerd) has them stamped now, as the kubelet
// stamps the figures it reads itself.
func networkStats(n *runtimeapi.NetworkUsage, now time.Time) *statsapi.NetworkStats {
	if n == nil {
		return nil
	}
	iface := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		s := statsapi.InterfaceStats{Name: i.GetName()}
		if v := i.GetRxBytes(); v != nil {
			s.RxBytes = u64(v.GetValue())
		}
		if v := i.GetRxErrors(); v != nil {
			s.RxErrors = u64(v.GetValue())
		}
		if v := i.GetTxBytes(); v != nil {
			s.TxBytes = u64(v.GetValue())
		}
		if v := i.GetTxErrors(); v != nil {
			s.TxErrors = u64(v.GetValue())
		}
		return s
	}
	s := &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, n.GetTimestamp()))}
	if n.GetTimestamp() == 0 {
		s.Time = metav1.NewTime(now)
	}
	if d := n.GetDefaultInterface(); d != nil {
		s.InterfaceStats = iface(d)
	}
	for _, i := range n.GetInterfaces() {
		s.Interfaces = append(s.Interfaces, iface(i))
	}
	return s
}

// sumContainers sums the containers' CPU and memory, for a runtime
// without pod sandbox stats.
func sumContainers(cs []statsapi.ContainerStats) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var cpu *statsapi.CPUStats
	var mem *statsapi.MemoryStats
	add := func(dst **uint64, v *uint64) {
		if v == nil {
			return
		}
		if *dst == nil {
			*dst = u64(0)
		}
		**dst += *v
	}
	for _, c := range cs {
		if c.CPU != nil {
			if cpu == nil {
				cpu = &statsapi.CPUStats{Time: c.CPU.Time}
			}
			if c.CPU.Time.After(cpu.Time.Time) {
				cpu.Time = c.CPU.Time
			}
			add(&cpu.UsageCoreNanoSeconds, c.CPU.UsageCoreNanoSeconds)
			add(&cpu.UsageNanoCores, c.CPU.UsageNanoCores)
		}
		if c.Memory != nil {
			if mem == nil {
				mem = &statsapi.MemoryStats{Time: c.Memory.Time}
			}
			if c.Memory.Time.After(mem.Time.Time) {
				mem.Time = c.Memory.Time
			}
			add(&mem.WorkingSetBytes, c.Memory.WorkingSetBytes)
			add(&mem.UsageBytes, c.Memory.UsageBytes)
			add(&mem.RSSBytes, c.Memory.RSSBytes)
		}
	}
	return cpu, mem
}

// ephemeralStorage is the pod's ephemeral storage as the kubelet's
// calcEphemeralStorage counts it: its containers' writable layers and
// logs, and its ephemeral volumes; nil when none is known.
func ephemeralStorage(cs []statsapi.ContainerStats, volumes []statsapi.VolumeStats) *statsapi.FsStats {
	var fs *statsapi.FsStats
	add := func(f *statsapi.FsStats) {
		if f == nil || f.UsedBytes == nil {
			return
		}
		if fs == nil {
			fs = &statsapi.FsStats{Time: f.Time, UsedBytes: u64(0), InodesUsed: u64(0)}
		}
		if f.Time.After(fs.Time.Time) {
			fs.Time = f.Time
		}
		*fs.UsedBytes += *f.UsedBytes
		if f.InodesUsed != nil {
			*fs.InodesUsed += *f.InodesUsed
		}
	}
	for _, c := range cs {
		add(c.Rootfs)
		add(c.Logs)
	}
	for i := range volumes {
		add(&volumes[i].FsStats)
	}
	return fs
}

// dirStats is a directory's size, nil when it cannot be measured.
func (p *Provider) dirStats(dir string, now time.Time) *statsapi.FsStats {
	if dir == "" {
		return nil
	}
	b, n, err := p.disk.get(dir, now, p.opts.DiskUsagePeriod)
	if err != nil && !errors.Is(err, ErrTooManyEntries) {
		p.log.V(4).Info("Cannot measure a directory", "dir", dir, "err", err.Error())
		return nil
	}
	return &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: u64(b), InodesUsed: u64(n)}
}

// volumeStats are the sizes of the volumes' directories, sorted by name.
func (p *Provider) volumeStats(dirs map[string]string, now time.Time) []statsapi.VolumeStats {
	var out []statsapi.VolumeStats
	for name, dir := range dirs {
		if fs := p.dirStats(dir, now); fs != nil {
			out = append(out, statsapi.VolumeStats{Name: name, FsStats: *fs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// containerCgroupStats fills the container's missing CPU and memory from
// its cgroup, when Cgroups and ContainerCgroup know it.
func (p *Provider) containerCgroupStats(cs *statsapi.ContainerStats, pod statsapi.PodReference, id string, now time.Time, seen map[string]bool) {
	if p.opts.Cgroups == nil || p.opts.ContainerCgroup == nil {
		return
	}
	p.cgroupStats(cs, p.opts.ContainerCgroup(pod, id), id, now, seen)
}

// cgroupStats fills the missing CPU and memory from the named cgroup,
// the CPU's rate from the last sample kept under key (marked in seen,
// when not nil, to be kept).
func (p *Provider) cgroupStats(cs *statsapi.ContainerStats, name, id string, now time.Time, seen map[string]bool) {
	if name == "" {
		return
	}
	st, err := p.opts.Cgroups.Stats(name)
	if err != nil {
		p.log.V(4).Info("Cannot read a container's cgroup", "cgroup", name, "err", err.Error())
		return
	}
	t := metav1.NewTime(now)
	if cs.Memory == nil {
		cs.Memory = &statsapi.MemoryStats{Time: t, UsageBytes: u64(st.MemoryUsage), WorkingSetBytes: u64(st.MemoryWorkingSet)}
	}
	if cs.CPU == nil {
		usage := uint64(st.CPUUsage.Nanoseconds())
		cs.CPU = &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: u64(usage)}
		p.mu.Lock()
		if prev, ok := p.prevContainerCPU[id]; ok && now.After(prev.t) && usage >= prev.usage {
			cs.CPU.UsageNanoCores = u64(uint64(float64(usage-prev.usage) / now.Sub(prev.t).Seconds()))
		}
		if p.prevContainerCPU == nil {
			p.prevContainerCPU = map[string]cpuSample{}
		}
		p.prevContainerCPU[id] = cpuSample{t: now, usage: usage}
		p.mu.Unlock()
		if seen != nil {
			seen[id] = true
		}
	}
}

// latestContainers keeps, of each pod's containers of one name, the
// running ones, or the newest when none runs, as the kubelet's
// removeTerminatedContainers: a container in a restart back-off is still
// listed in its pod, with no CPU or memory figures.
func latestContainers(cs []*runtimeapi.Container) []*runtimeapi.Container {
	type key struct{ sandbox, name string }
	byName := map[key][]*runtimeapi.Container{}
	var keys []key
	for _, c := range cs {
		k := key{c.GetPodSandboxId(), c.GetMetadata().GetName()}
		if _, ok := byName[k]; !ok {
			keys = append(keys, k)
		}
		byName[k] = append(byName[k], c)
	}
	out := make([]*runtimeapi.Container, 0, len(keys))
	for _, k := range keys {
		group := byName[k]
		running := false
		for _, c := range group {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				out = append(out, c)
				running = true
			}
		}
		if !running {
			newest := group[0]
			for _, c := range group[1:] {
				if c.GetCreatedAt() > newest.GetCreatedAt() {
					newest = c
				}
			}
			out = append(out, newest)
		}
	}
	return out
}
