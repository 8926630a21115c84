package nodekit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/gc"
	"github.com/nodekit/nodekit/logrotate"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// NodeResourcesOptions configure how the agent keeps its node alive:
// what it holds back from pods, node-pressure eviction, and garbage
// collection of containers, sandboxes, logs and images.
type NodeResourcesOptions struct {
	// SystemReserved and KubeReserved are held back from pods (the
	// kubelet's --system-reserved and --kube-reserved): the node's
	// allocatable resources are its capacity less these and the hard
	// eviction thresholds. Defaults to none.
	SystemReserved, KubeReserved v1.ResourceList
	// SkipAllocatableEnforcement sizes the node's pod cgroup (kubepods) to
	// the capacity rather than to the allocatable resources, as the
	// kubelet with enforceNodeAllocatable: []. By default it is sized as
	// the kubelet's enforceNodeAllocatable: [pods]: cpu shares, memory,
	// pids and hugepages of the capacity less SystemReserved and
	// KubeReserved (not the hard eviction thresholds: the eviction manager
	// acts before the kernel's OOM killer does). Options.Cgroups.Allocatable,
	// when set, is used as it is instead.
	SkipAllocatableEnforcement bool
	// Eviction configures node-pressure eviction.
	Eviction EvictionOptions
	// GC configures the garbage collectors.
	GC GCOptions
	// LogRotation configures the rotation of the containers' logs (10Mi,
	// 5 files, every 10s, rotated files gzip-compressed). It needs a
	// runtime that can reopen a container's log (CRI ReopenContainerLog:
	// the runtime/cri client); without one, logs are not rotated and the
	// agent logs why.
	LogRotation LogRotationOptions
}

// LogRotationOptions configure the container log rotation (package
// logrotate).
type LogRotationOptions struct {
	Disable bool
	logrotate.Options
}

// EvictionOptions configure the eviction manager (package eviction).
type EvictionOptions struct {
	// Enable runs the eviction manager even when Options.Cgroups is
	// disabled (by default an agent that does not own its host's cgroups
	// does not evict for the host's pressure).
	Enable bool
	// Disable turns the eviction manager off.
	Disable bool
	// MemoryOfPodsOnly measures memory.available as the memory of
	// Options.Capacity less the working set of the agent's pod cgroup root
	// (kubepods), rather than the host's memory less its root cgroup's
	// working set: for an agent given a share of a host it shares with
	// workloads that are not its concern. It needs Options.Capacity's
	// memory and cgroups; the threshold notifications then watch the pod
	// cgroup root.
	MemoryOfPodsOnly bool
	// Manager configures it: thresholds (the kubelet's hard defaults:
	// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
	// imagefs.available<15%), pressure transition period 5m, monitoring
	// every 10s. ActivePods, Evict, Terminated, the reclaim functions and
	// Recorder are the agent's. Stats defaults to eviction.CgroupStats on
	// the agent's cgroups, root directory and pod logs, and then
	// MemoryCgroup to the cgroup v1 memory root (threshold notifications).
	Manager eviction.Options
}

// GCOptions configure the agent's garbage collectors (package gc): dead
// containers, old sandboxes and the logs of deleted pods every minute,
// unused images every five minutes above 85% of the image file system.
type GCOptions struct {
	// DisableContainers turns the container and sandbox collector off.
	DisableContainers bool
	// Containers configures the container collector. Pods, SourcesReady
	// and PodLogsDir are the agent's.
	Containers gc.ContainerOptions
	// DisableImages turns the image collector off.
	DisableImages bool
	// Images configures the image collector. Containers is the agent's
	// Runtime, unscoped: every container on it keeps its image. Without FsStats or ImageFsPath the collector reads the
	// image file system the runtime names (CRI ImageFsInfo, with the
	// runtime/cri client); when the runtime cannot name it, images are
	// not collected and the agent logs why.
	Images gc.ImageOptions
}

// nodeAlive holds the parts that keep the node alive.
type nodeAlive struct {
	containerGC *gc.ContainerCollector // nil when disabled
	imageGC     *gc.ImageCollector     // nil when disabled
	eviction    *eviction.Manager      // nil when disabled
	logs        *logrotate.Rotator     // nil when disabled
	thresholds  []eviction.Threshold
	imageFs     func(context.Context) (gc.FsStats, error) // nil when unknown
	// stats is the summary provider the eviction manager reads, shared
	// with the node API's /stats/summary.
	stats *stats.Provider
}

// buildNodeAlive builds the garbage collectors and the eviction manager;
// the pod workers and sources exist by then.
func (a *Agent) buildNodeAlive() error {
	o := a.opts.NodeResources
	if !o.GC.DisableContainers {
		co := o.GC.Containers
		co.Pods = a.workers
		co.SourcesReady = a.config.SourcesReady
		co.PodLogsDir = a.opts.RuntimeManager.PodLogsDir // "": the same default
		if co.Changes == nil {
			// A collection over unchanged pods finds nothing: it does not
			// list ten thousand containers every minute.
			co.Changes = func() (uint64, bool) {
				if a.handler == nil {
					return 0, false
				}
				return a.handler.changeCount()
			}
		}
		if co.Logger.GetSink() == nil {
			co.Logger = a.log
		}
		c, err := gc.NewContainerCollector(a.opts.Runtime, co)
		if err != nil {
			return fmt.Errorf("nodekit: %w", err)
		}
		a.alive.containerGC = c
	}
	if !o.GC.DisableImages {
		io := o.GC.Images
		// Images are the runtime's, not the agent's: one in use by any
		// container on the runtime, another agent's included, stays.
		io.Containers = a.opts.Runtime
		if s, ok := a.opts.Runtime.(runtime.Scoped); ok {
			io.Containers = s.Unwrap()
		}
		if io.Logger.GetSink() == nil {
			io.Logger = a.log
		}
		if io.Listed == nil {
			io.Listed = a.runtime.PruneImageRecords
		}
		c, err := gc.NewImageCollector(a.opts.Images, io)
		if err != nil {
			if io.FsStats != nil || io.ImageFsPath != "" {
				return fmt.Errorf("nodekit: %w", err)
			}
			a.log.Info("Image garbage collection is off: the runtime does not name its image file system (set Options.NodeResources.GC.Images.ImageFsPath)")
		} else {
			a.alive.imageGC = c
			a.alive.imageFs = c.FsStats
		}
	}
	if lo := o.LogRotation; !lo.Disable {
		if lo.Logger.GetSink() == nil {
			lo.Logger = a.log
		}
		r, err := logrotate.New(a.logRotationRuntime(), lo.Options)
		if err != nil {
			a.log.Info("Container logs are not rotated", "reason", err.Error())
		} else {
			a.alive.logs = r
		}
	}
	if err := a.buildStats(); err != nil {
		return err
	}
	eo := o.Eviction
	if eo.Disable || (a.opts.Cgroups.Disabled && !eo.Enable) {
		return nil
	}
	mo := eo.Manager
	mo.ActivePods = a.handlerActivePods
	mo.Evict = a.evictPod
	mo.Terminated = func(p *v1.Pod) bool { return !a.workers.CouldHaveRunningContainers(p.UID) }
	if c := a.alive.containerGC; c != nil {
		mo.ReclaimContainers = func(ctx context.Context) error { _, err := c.Collect(ctx, true); return err }
	}
	if c := a.alive.imageGC; c != nil {
		mo.ReclaimImages = func(ctx context.Context) error { _, err := c.DeleteUnused(ctx); return err }
	}
	if mo.Recorder == nil {
		mo.Recorder = &a.recorder
	}
	if mo.Logger.GetSink() == nil {
		mo.Logger = a.log
	}
	if mo.Stats == nil {
		cs := a.defaultStats()
		mo.Stats = cs
		if eo.MemoryOfPodsOnly {
			mem, ok := a.opts.Capacity[v1.ResourceMemory]
			if !ok || mem.Sign() <= 0 || cs.PodCgroupRoot == "" {
				return errors.New("nodekit: NodeResources.Eviction.MemoryOfPodsOnly needs Options.Capacity memory and cgroups")
			}
			cs.MemoryCapacity, cs.MemoryCgroup = uint64(mem.Value()), cs.PodCgroupRoot
		}
		if mo.MemoryCgroup == "" {
			root := a.opts.Cgroups.CgroupfsRoot
			if root == "" {
				root = "/sys/fs/cgroup"
			}
			// cgroup v1: threshold notifications on the memory usage of
			// the node (or of the pods' cgroup); on v2 the manager finds
			// none and polls.
			mo.MemoryCgroup = filepath.Join(root, "memory", cs.MemoryCgroup)
		}
	}
	m, err := eviction.New(mo)
	if err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	a.alive.eviction = m
	a.alive.thresholds = m.Thresholds()
	return nil
}

// handlerActivePods are the pods the agent runs; the handler is built
// after the eviction manager.
func (a *Agent) handlerActivePods() []*v1.Pod {
	if a.handler == nil {
		return nil
	}
	return a.handler.ActivePods()
}

// defaultStats reads the host: the agent's pod cgroups, root directory,
// pod logs and emptyDirs, and the image file system when known.
func (a *Agent) defaultStats() *eviction.CgroupStats {
	cs := &eviction.CgroupStats{
		CgroupfsRoot: a.opts.Cgroups.CgroupfsRoot,
		NodeFsPath:   a.opts.RootDir,
		Pods:         a.handlerActivePods,
	}
	if !a.opts.Cgroups.Disabled {
		root := a.opts.Cgroups.Root
		if root == "" {
			root = "kubepods"
		}
		cs.PodCgroupRoot = "/" + filepath.Clean(root)
		if filepath.IsAbs(root) {
			cs.PodCgroupRoot = filepath.Clean(root)
		}
	}
	if fs := a.alive.imageFs; fs != nil {
		cs.ImageFs = func(ctx context.Context) (*eviction.FsStats, error) {
			s, err := fs(ctx)
			if err != nil {
				return nil, err
			}
			return &eviction.FsStats{AvailableBytes: s.Available, CapacityBytes: s.Capacity, InodesFree: s.InodesFree, Inodes: s.Inodes}, nil
		}
	}
	cs.EmptyDirs = a.emptyDirs
	cs.ContainerLogDirs = func(p *v1.Pod) map[string]string {
		out := map[string]string{}
		for _, c := range p.Spec.Containers {
			out[c.Name] = a.containerLogDir(p.Namespace, p.Name, p.UID, c.Name)
		}
		return out
	}
	if p := a.alive.stats; p != nil {
		cs.Summary = func(ctx context.Context) (*statsapi.Summary, error) { return p.Summary(ctx, false) }
		cs.ContainerLogDirs = nil
		cs.EmptyDirs = nil
	}
	cs.Logger = a.log
	return cs
}

// emptyDirs are the directories of the pod's emptyDir volumes on disk, by
// volume name (memory-backed ones are bounded by their tmpfs).
func (a *Agent) emptyDirs(p *v1.Pod) map[string]string {
	dirs := a.volumes.PodDirs()
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.Medium == v1.StorageMediumMemory {
			continue
		}
		out[v.Name] = filepath.Join(dirs.Volumes(p.UID), "kubernetes.io~empty-dir", v.Name)
	}
	return out
}

// containerLogDir is the directory of a container's log files.
func (a *Agent) containerLogDir(namespace, name string, uid types.UID, container string) string {
	root := a.opts.RuntimeManager.PodLogsDir
	if root == "" {
		root = runtime.DefaultPodLogsDir
	}
	return filepath.Join(runtime.PodLogsDirectory(root, namespace, name, uid), container)
}

// buildStats builds the summary provider of the agent's pods: the
// sandboxes and containers of the agent's runtime, their CPU and memory
// from the runtime's CRI client when it has one (else from their
// cgroups), their logs and emptyDirs measured. Without a pod cgroup
// manager or CRI client there is nothing to read CPU and memory from, and
// the eviction manager measures the directories itself.
func (a *Agent) buildStats() error {
	sr := statsRuntime{rs: a.opts.Runtime}
	inner := a.opts.Runtime
	if sc, ok := inner.(runtime.Scoped); ok {
		inner = sc.Unwrap()
	}
	if rc, ok := inner.(runtimeClienter); ok {
		sr.cri = rc.RuntimeClient()
	}
	if sr.cri == nil && a.opts.Cgroups.Disabled {
		return nil
	}
	so := stats.Options{
		NodeName: a.opts.NodeName,
		Runtime:  sr,
		RootDir:  a.opts.RootDir,
		ContainerLogDir: func(pod statsapi.PodReference, container string) string {
			return a.containerLogDir(pod.Namespace, pod.Name, types.UID(pod.UID), container)
		},
		PodVolumes: func(ref statsapi.PodReference) map[string]string {
			p, ok := a.pods.GetPodByUID(types.UID(ref.UID))
			if !ok {
				return nil
			}
			return a.emptyDirs(p)
		},
		Logger: a.log,
	}
	if !a.opts.Cgroups.Disabled {
		so.Cgroups = a.cgroups
		so.ContainerCgroup = func(ref statsapi.PodReference, id string) string {
			p, ok := a.pods.GetPodByUID(types.UID(ref.UID))
			if !ok {
				return ""
			}
			return a.cgroups.CgroupName(p) + "/" + id
		}
	}
	p, err := stats.New(so)
	if err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	a.alive.stats = p
	return nil
}

// statsRuntime is the summary's view of the agent's runtime: its
// sandboxes and containers, and the stats of its CRI client when it has
// one.
type statsRuntime struct {
	rs  runtime.RuntimeService
	cri runtimeapi.RuntimeServiceClient // nil: no stats
}

var errNoRuntimeStats = status.Error(codes.Unimplemented, "the runtime serves no stats")

func (s statsRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return s.rs.ListPodSandbox(ctx, f)
}

func (s statsRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return s.rs.ListContainers(ctx, f)
}

func (s statsRuntime) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	if s.cri == nil {
		return nil, errNoRuntimeStats
	}
	r, err := s.cri.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: f})
	return r.GetStats(), err
}

func (s statsRuntime) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	if s.cri == nil {
		return nil, errNoRuntimeStats
	}
	r, err := s.cri.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: f})
	return r.GetStats(), err
}

// evictPod stops a pod for the eviction manager, as the kubelet's
// killPodFunc: the pod becomes terminal with the status the manager gives.
func (a *Agent) evictPod(pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	a.workers.UpdatePod(podworker.UpdateOptions{
		UpdateType: podworker.SyncPodKill,
		Pod:        pod,
		KillPodOptions: &podworker.KillPodOptions{
			Evict:                                    true,
			PodStatusFunc:                            status,
			PodTerminationGracePeriodSecondsOverride: &grace,
		},
	})
}

// prepareNodeAlive completes the capacity measured on the machine with its
// hugepages and its ephemeral storage (the size of the file system holding
// RootDir), as the kubelet's, and sizes the node's pod cgroup (kubepods) as the kubelet's
// enforceNodeAllocatableCgroups does. Run calls it once the capacity is
// known, before the node cgroups are made.
func (a *Agent) prepareNodeAlive() error {
	// The Node's ephemeral-storage capacity is RootDir's file system.
	if err := os.MkdirAll(a.opts.RootDir, 0o750); err != nil {
		return fmt.Errorf("nodekit: creating the root directory: %w", err)
	}
	if a.opts.Capacity == nil {
		if pages, err := node.ReadHugePages(""); err != nil {
			a.log.Info("Hugepages are not offered to pods", "reason", err.Error())
		} else {
			maps.Copy(a.capacity, node.HugePagesCapacity(pages))
		}
		if size, err := node.FsSize(a.opts.RootDir); err != nil {
			a.log.Info("Ephemeral storage is not offered to pods", "reason", err.Error())
		} else {
			a.capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
		}
	}
	if a.opts.Cgroups.Disabled || a.opts.Cgroups.Allocatable != nil {
		return nil
	}
	alloc := a.nodeCgroupResources()
	if err := a.cgroups.SetAllocatable(alloc); err != nil {
		return fmt.Errorf("nodekit: sizing the node's pod cgroup: %w", err)
	}
	return nil
}

// nodeCgroupResources are the kubelet's limits of the node's pod cgroup:
// the internal capacity (the capacity, the host's process IDs as "pid",
// its hugepages) less SystemReserved and KubeReserved, or the capacity
// itself with SkipAllocatableEnforcement.
func (a *Agent) nodeCgroupResources() v1.ResourceList {
	capacity := a.capacity.DeepCopy()
	if _, ok := capacity["pid"]; !ok {
		if n, err := node.ReadMaxPIDs(); err == nil {
			capacity["pid"] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	if pages, err := node.ReadHugePages(""); err == nil {
		for name, q := range node.HugePagesCapacity(pages) {
			if _, ok := capacity[name]; !ok {
				capacity[name] = q
			}
		}
	}
	o := a.opts.NodeResources
	if o.SkipAllocatableEnforcement {
		return capacity
	}
	return node.Allocatable(capacity, o.SystemReserved, o.KubeReserved)
}

// Allocatable is what the node offers pods: its capacity (Options.Capacity
// or the machine's cpu and memory, known once Run started) less
// SystemReserved, KubeReserved and the hard eviction thresholds of memory
// and nodefs, the kubelet's formula. Admission checks the pods' requests
// against it.
func (a *Agent) Allocatable() v1.ResourceList {
	capacity := a.capacity
	if capacity == nil {
		capacity = a.opts.Capacity
	}
	o := a.opts.NodeResources
	return node.Allocatable(capacity, o.SystemReserved, o.KubeReserved, eviction.HardReservation(a.alive.thresholds, capacity))
}

// NodeConditions are the node's pressure conditions (MemoryPressure,
// DiskPressure, PIDPressure) as the eviction manager sees them.
func (a *Agent) NodeConditions() []v1.NodeConditionType {
	if a.alive.eviction == nil {
		return nil
	}
	return a.alive.eviction.Conditions()
}

// EvictionAdmit is the kubelet's eviction admission check over the
// agent's pressure conditions: under memory pressure BestEffort pods are
// refused (unless they tolerate the memory-pressure taint), under disk or
// PID pressure every pod but the critical ones; reason Evicted, message
// "The node had condition: [...]", and a Warning event on the pod, as the
// kubelet's rejectPod.
func (a *Agent) EvictionAdmit() admission.Handler {
	return admission.Func(func(pod *v1.Pod, _ []*v1.Pod) admission.Result {
		ok, reason, msg := eviction.Admit(pod, a.NodeConditions())
		if ok {
			return admission.Admitted()
		}
		a.recorder.Event(pod, v1.EventTypeWarning, reason, msg)
		return admission.Result{Admit: false, Reason: reason, Message: msg}
	})
}

// nodeAliveNodeOptions gives the Node controller the reservations, the
// pressure conditions, the images and the events.
func (a *Agent) nodeAliveNodeOptions(o *node.Options) {
	r := a.opts.NodeResources
	if o.SystemReserved == nil {
		o.SystemReserved = r.SystemReserved
	}
	if o.KubeReserved == nil {
		o.KubeReserved = r.KubeReserved
	}
	if o.HardEvictionReserved == nil {
		o.HardEvictionReserved = func(capacity v1.ResourceList) v1.ResourceList {
			return eviction.HardReservation(a.alive.thresholds, capacity)
		}
	}
	if o.Pressure == nil {
		o.Pressure = a.NodeConditions
	}
	if o.Machine == nil && o.EphemeralStoragePath == "" {
		// The kubelet's ephemeral-storage capacity: its root directory's
		// file system.
		o.EphemeralStoragePath = a.opts.RootDir
	}
	if o.Images == nil {
		is := a.opts.Images
		o.Images = func(ctx context.Context) ([]*runtimeapi.Image, error) { return is.ListImages(ctx, nil) }
	}
	if o.Recorder == nil {
		o.Recorder = &a.recorder
	}
}

// runNodeAlive starts the collectors' and the eviction manager's loops.
func (a *Agent) runNodeAlive(run func(name string, f func(context.Context) error)) {
	if c := a.alive.containerGC; c != nil {
		run("container gc", c.Run)
	}
	if c := a.alive.imageGC; c != nil {
		run("image gc", c.Run)
	}
	if m := a.alive.eviction; m != nil {
		run("eviction manager", m.Run)
	}
	if r := a.alive.logs; r != nil {
		run("log rotation", r.Run)
	}
}

// runtimeRecovered is called when the runtime answers again after it did
// not (and after the first check): sandboxes that a crash left half-made
// are collected at once rather than at the next period.
func (a *Agent) runtimeRecovered() {
	if c := a.alive.containerGC; c != nil {
		c.Trigger()
	}
}
