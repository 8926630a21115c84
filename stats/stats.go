package stats

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
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
	// ListPodSandboxStats.
	noSandboxStats bool
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
	return &statsapi.Summary{Node: p.nodeStats(now, onlyCPUAndMemory), Pods: pods}, nil
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
	}
	if onlyCPUAndMemory {
		return n
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
	containers, err := p.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("stats: listing containers: %w", err)
	}
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
	if sbStats == nil {
		list, err := p.opts.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
		if err != nil {
			return nil, fmt.Errorf("stats: container stats: %w", err)
		}
		for _, s := range list {
			ctrStats[s.GetAttributes().GetId()] = s
		}
	} else {
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
			ps.Containers = append(ps.Containers, cs)
		}
		if sb := sbStats[s.GetId()]; sb != nil {
			l := sb.GetLinux()
			ps.CPU = cpuStats(l.GetCpu())
			ps.Memory = memoryStats(l.GetMemory())
			if !onlyCPUAndMemory {
				ps.Network = networkStats(l.GetNetwork())
				if pr := l.GetProcess(); pr != nil && pr.GetProcessCount() != nil {
					ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64(pr.GetProcessCount().GetValue())}
				}
			}
		} else {
			ps.CPU, ps.Memory = sumContainers(ps.Containers)
		}
		if !onlyCPUAndMemory {
			ps.EphemeralStorage = sumRootfs(ps.Containers)
		}
		out = append(out, ps)
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

func networkStats(n *runtimeapi.NetworkUsage) *statsapi.NetworkStats {
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

// sumRootfs is the pod's ephemeral storage the runtime reports: its
// containers' writable layers.
func sumRootfs(cs []statsapi.ContainerStats) *statsapi.FsStats {
	var fs *statsapi.FsStats
	for _, c := range cs {
		if c.Rootfs == nil || c.Rootfs.UsedBytes == nil {
			continue
		}
		if fs == nil {
			fs = &statsapi.FsStats{Time: c.Rootfs.Time, UsedBytes: u64(0), InodesUsed: u64(0)}
		}
		*fs.UsedBytes += *c.Rootfs.UsedBytes
		if c.Rootfs.InodesUsed != nil {
			*fs.InodesUsed += *c.Rootfs.InodesUsed
		}
	}
	return fs
}
