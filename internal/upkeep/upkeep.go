// Package upkeep keeps a node alive, as the kubelet's node-level
// managers do: it builds and runs, from Options with the kubelet's
// defaults, the garbage collectors of dead containers, old sandboxes, the
// logs of deleted pods and unused images (package gc), node-pressure
// eviction (package eviction) with its admission check, the rotation of
// the containers' logs (package logrotate), and the summary of the pods'
// stats they read (package stats). It also computes what the node offers
// pods (Allocatable: capacity less the reservations and the hard eviction
// thresholds) and sizes the node's pod cgroup.
//
// # Usage
//
//	m, err := upkeep.New(upkeep.Options{}, upkeep.Parts{...})
//	err = m.Prepare(capacity) // once the capacity is known
//	err = m.AddTo(&group)     // the loops, into the agent's run.Group
//
// It is internal: an agent builds it from nodekit.Options.NodeResources
// (whose types are this package's Options, aliased). To replace one
// collector, disable it there and add your own part with Agent.Add; the
// eviction manager's stats, thresholds and reclaim functions are set
// through Options.Eviction.Manager. A hand-assembled agent uses packages
// gc, eviction and logrotate directly.
//
// # Differences from the kubelet
//
// The log rotator reads the size of the logs written since its last pass
// (inotify), checks a log written at full speed every few milliseconds
// near its size limit, cuts what the runtime writes to a rotated log
// while it reopens it past twice MaxSize, and compresses off the
// rotations' path, so that a container's logs stay under twice MaxSize ×
// MaxFiles; it reads the running containers from the PLEG's cache; the
// container collector does not list the runtime while nothing it depends
// on changed (Parts.Changes; it reads the pod log directories all the
// same, as the kubelet does every minute), and otherwise reads the pods with something
// dead from the PLEG's cache (gc.CachedLister), listing the runtime
// itself every gc.ContainerOptions.Resync. See packages logrotate and gc.
//
// # Concurrency
//
// A Manager is safe for concurrent use once Prepare returned.
package upkeep

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/go-logr/logr"
	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/gc"
	"github.com/nodekit/nodekit/logrotate"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
	"github.com/nodekit/nodekit/volume"
)

// Options configure how the agent keeps its node alive: what it holds
// back from pods, node-pressure eviction, and garbage collection of
// containers, sandboxes, logs and images.
type Options struct {
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
	// Options.Node.Capacity less the working set of the agent's pod cgroup root
	// (kubepods), rather than the host's memory less its root cgroup's
	// working set: for an agent given a share of a host it shares with
	// workloads that are not its concern. It needs Options.Node.Capacity's
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

// Parts are the parts of the agent the Manager works with. The functions
// may be called from Run on: those of parts built after the Manager (the
// handler) answer nothing until they exist.
type Parts struct {
	NodeName string
	// Periodic is nodekit.Options.Periodic: the container collector's
	// Driver unless GC.Containers.Periodic is set.
	Periodic *periodic.Driver
	// RootDir is the agent's directory: the node file system the
	// eviction manager watches.
	RootDir string
	// Capacity is nodekit.Options.Node.Capacity: nil when the machine's is
	// measured.
	Capacity v1.ResourceList
	// Cgroups are the agent's cgroup options and CgroupManager its pod
	// cgroups (nil when disabled).
	Cgroups       cgroup.PodManagerOptions
	CgroupManager *cgroup.PodManager
	// PodLogsDir is the runtime manager's ("" for the default).
	PodLogsDir string
	// Runtime is the runtime as the agent's parts call it (scoped to its
	// identity), Images its image service.
	Runtime runtime.RuntimeService
	Images  runtime.ImageService
	// PodRuntime is the pod-level runtime manager: the image records it
	// keeps and the log paths it gives containers.
	PodRuntime PodRuntime
	// Cache is the PLEG's cache when the PLEG keeps every pod of the
	// runtime there (a PLEG of package pleg), else nil: the log rotator
	// then lists the runtime.
	Cache *pleg.StatusCache
	// Workers are the pod workers.
	Workers Workers
	// SourcesReady reports whether every pod source delivered its pods.
	SourcesReady func() bool
	// ActivePods are the admitted pods that may still run.
	ActivePods func() []*v1.Pod
	// PodByUID finds a pod the agent knows.
	PodByUID func(types.UID) (*v1.Pod, bool)
	// Changes counts the changes of what the container collector depends
	// on (synchandler.Handler.ChangeCount).
	Changes func() (uint64, bool)
	// PodDirs are the volume manager's pod directories.
	PodDirs func() volume.PodDirs
	// Recorder receives the eviction events.
	Recorder runtime.EventRecorder
	Logger   logr.Logger
}

// PodRuntime is what the Manager reads of the pod-level runtime manager.
type PodRuntime interface {
	PruneImageRecords(listedAt time.Time, present []string)
	ContainerLogPath(*runtime.PodStatus, *runtime.ContainerStatus) string
	PodLogDir(*runtime.PodStatus) string
}

// Workers are the pod workers as the collectors and the eviction manager
// see them (podworker.Workers).
type Workers interface {
	gc.PodState
	UpdatePod(podworker.UpdateOptions)
	CouldHaveRunningContainers(uid types.UID) bool
}

// Manager holds the parts that keep the node alive: the garbage
// collectors, the eviction manager, the log rotator and the stats they
// read. It is safe for concurrent use once built.
type Manager struct {
	o           Options
	p           Parts
	log         logr.Logger
	containerGC *gc.ContainerCollector // nil when disabled
	imageGC     *gc.ImageCollector     // nil when disabled
	eviction    *eviction.Manager      // nil when disabled
	logs        *logrotate.Rotator     // nil when disabled
	thresholds  []eviction.Threshold
	imageFs     func(context.Context) (gc.FsStats, error) // nil when unknown
	// stats is the summary provider the eviction manager reads, shared
	// with the node API's /stats/summary.
	stats *stats.Provider
	// capacity is Parts.Capacity or the machine's, as Prepare completed
	// it; nil before.
	capacity v1.ResourceList
}

// New builds the garbage collectors, the log rotator, the stats and the
// eviction manager, as o enables them. It does no I/O and starts no
// goroutine.
func New(o Options, p Parts) (*Manager, error) {
	m := &Manager{o: o, p: p, log: p.Logger}
	if err := m.build(); err != nil {
		return nil, err
	}
	return m, nil
}

// build builds the garbage collectors and the eviction manager.
func (m *Manager) build() error {
	o := m.o
	if !o.GC.DisableContainers {
		co := o.GC.Containers
		co.Pods = m.p.Workers
		co.SourcesReady = m.p.SourcesReady
		co.PodLogsDir = m.p.PodLogsDir // "": the same default
		if co.Periodic == nil {
			co.Periodic = m.p.Periodic
		}
		if co.Changes == nil {
			// A collection over unchanged pods finds nothing: it does not
			// list ten thousand containers every minute.
			co.Changes = m.p.Changes
		}
		if co.Logger.GetSink() == nil {
			co.Logger = m.log
		}
		c, err := gc.NewContainerCollector(m.gcRuntime(), co)
		if err != nil {
			return fmt.Errorf("upkeep: %w", err)
		}
		m.containerGC = c
	}
	if !o.GC.DisableImages {
		io := o.GC.Images
		// Images are the runtime's, not the agent's: one in use by any
		// container on the runtime, another agent's included, stays.
		io.Containers = m.p.Runtime
		if s, ok := m.p.Runtime.(runtime.Scoped); ok {
			io.Containers = s.Unwrap()
		}
		if io.Logger.GetSink() == nil {
			io.Logger = m.log
		}
		if io.Listed == nil {
			io.Listed = m.p.PodRuntime.PruneImageRecords
		}
		c, err := gc.NewImageCollector(m.p.Images, io)
		if err != nil {
			if io.FsStats != nil || io.ImageFsPath != "" {
				return fmt.Errorf("upkeep: %w", err)
			}
			m.log.Info("Image garbage collection is off: the runtime does not name its image file system (set Options.NodeResources.GC.Images.ImageFsPath)")
		} else {
			m.imageGC = c
			m.imageFs = c.FsStats
		}
	}
	if lo := o.LogRotation; !lo.Disable {
		if lo.Logger.GetSink() == nil {
			lo.Logger = m.log
		}
		r, err := logrotate.New(m.logRotationRuntime(), lo.Options)
		if err != nil {
			m.log.Info("Container logs are not rotated", "reason", err.Error())
		} else {
			m.logs = r
		}
	}
	if err := m.buildStats(); err != nil {
		return err
	}
	eo := o.Eviction
	if eo.Disable || (m.p.Cgroups.Disabled && !eo.Enable) {
		return nil
	}
	mo := eo.Manager
	mo.ActivePods = m.p.ActivePods
	mo.Evict = m.evictPod
	mo.Terminated = func(p *v1.Pod) bool { return !m.p.Workers.CouldHaveRunningContainers(p.UID) }
	if c := m.containerGC; c != nil {
		mo.ReclaimContainers = func(ctx context.Context) error { _, err := c.Collect(ctx, true); return err }
	}
	if c := m.imageGC; c != nil {
		mo.ReclaimImages = func(ctx context.Context) error { _, err := c.DeleteUnused(ctx); return err }
	}
	if mo.Recorder == nil {
		mo.Recorder = m.p.Recorder
	}
	if mo.Logger.GetSink() == nil {
		mo.Logger = m.log
	}
	if mo.Stats == nil {
		cs := m.defaultStats()
		mo.Stats = cs
		if eo.MemoryOfPodsOnly {
			mem, ok := m.p.Capacity[v1.ResourceMemory]
			if !ok || mem.Sign() <= 0 || cs.PodCgroupRoot == "" {
				return errors.New("upkeep: NodeResources.Eviction.MemoryOfPodsOnly needs Options.Node.Capacity memory and cgroups")
			}
			cs.MemoryCapacity, cs.MemoryCgroup = uint64(mem.Value()), cs.PodCgroupRoot
		}
		if mo.MemoryCgroup == "" {
			root := m.p.Cgroups.CgroupfsRoot
			if root == "" {
				root = "/sys/fs/cgroup"
			}
			// cgroup v1: threshold notifications on the memory usage of
			// the node (or of the pods' cgroup); on v2 the manager finds
			// none and polls.
			mo.MemoryCgroup = filepath.Join(root, "memory", cs.MemoryCgroup)
		}
	}
	em, err := eviction.New(mo)
	if err != nil {
		return fmt.Errorf("upkeep: %w", err)
	}
	m.eviction = em
	m.thresholds = em.Thresholds()
	return nil
}

// defaultStats reads the host: the agent's pod cgroups, root directory,
// pod logs and emptyDirs, and the image file system when known.
func (m *Manager) defaultStats() *eviction.CgroupStats {
	cs := &eviction.CgroupStats{
		CgroupfsRoot: m.p.Cgroups.CgroupfsRoot,
		NodeFsPath:   m.p.RootDir,
		Pods:         m.p.ActivePods,
	}
	if !m.p.Cgroups.Disabled {
		cs.PodCgroupRoot = m.podCgroupRoot()
	}
	if fs := m.imageFs; fs != nil {
		cs.ImageFs = func(ctx context.Context) (*eviction.FsStats, error) {
			s, err := fs(ctx)
			if err != nil {
				return nil, err
			}
			return &eviction.FsStats{AvailableBytes: s.Available, CapacityBytes: s.Capacity, InodesFree: s.InodesFree, Inodes: s.Inodes}, nil
		}
	}
	cs.EmptyDirs = m.emptyDirs
	cs.ContainerLogDirs = func(p *v1.Pod) map[string]string {
		out := map[string]string{}
		for _, c := range p.Spec.Containers {
			out[c.Name] = m.containerLogDir(p.Namespace, p.Name, p.UID, c.Name)
		}
		return out
	}
	if p := m.stats; p != nil {
		cs.Summary = func(ctx context.Context) (*statsapi.Summary, error) { return p.Summary(ctx, false) }
		cs.ContainerLogDirs = nil
		cs.EmptyDirs = nil
	}
	cs.Logger = m.log
	return cs
}

// emptyDirs are the directories of the pod's emptyDir volumes on disk, by
// volume name (memory-backed ones are bounded by their tmpfs).
func (m *Manager) emptyDirs(p *v1.Pod) map[string]string {
	dirs := m.p.PodDirs()
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
func (m *Manager) containerLogDir(namespace, name string, uid types.UID, container string) string {
	root := m.p.PodLogsDir
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
func (m *Manager) buildStats() error {
	sr := statsRuntime{rs: m.p.Runtime}
	inner := m.p.Runtime
	if sc, ok := inner.(runtime.Scoped); ok {
		inner = sc.Unwrap()
	}
	if rc, ok := inner.(interface {
		RuntimeClient() runtimeapi.RuntimeServiceClient
	}); ok {
		sr.cri = rc.RuntimeClient()
	}
	if sr.cri == nil && m.p.Cgroups.Disabled {
		return nil
	}
	so := stats.Options{
		NodeName: m.p.NodeName,
		Runtime:  sr,
		RootDir:  m.p.RootDir,
		ContainerLogDir: func(pod statsapi.PodReference, container string) string {
			return m.containerLogDir(pod.Namespace, pod.Name, types.UID(pod.UID), container)
		},
		PodVolumes: func(ref statsapi.PodReference) map[string]string {
			p, ok := m.p.PodByUID(types.UID(ref.UID))
			if !ok {
				return nil
			}
			return m.emptyDirs(p)
		},
		Logger: m.log,
	}
	if fs := m.imageFs; fs != nil {
		so.ImageFs = m.imageFsStats
	}
	if !m.p.Cgroups.Disabled {
		// The kubelet's system containers: its own cgroup and the pods'.
		so.SystemContainers = map[string]string{statsapi.SystemContainerPods: m.podCgroupRoot()}
		if self := selfCgroup(); self != "" && self != "/" {
			so.SystemContainers[statsapi.SystemContainerKubelet] = self
		}
		so.Cgroups = m.p.CgroupManager
		so.ContainerCgroup = func(ref statsapi.PodReference, id string) string {
			p, ok := m.p.PodByUID(types.UID(ref.UID))
			if !ok {
				return ""
			}
			return m.p.CgroupManager.CgroupName(p) + "/" + id
		}
	}
	p, err := stats.New(so)
	if err != nil {
		return fmt.Errorf("upkeep: %w", err)
	}
	m.stats = p
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
func (m *Manager) evictPod(pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	m.p.Workers.UpdatePod(podworker.UpdateOptions{
		UpdateType: podworker.SyncPodKill,
		Pod:        pod,
		KillPodOptions: &podworker.KillPodOptions{
			Evict:                                    true,
			PodStatusFunc:                            status,
			PodTerminationGracePeriodSecondsOverride: &grace,
		},
	})
}

// Prepare takes the node's capacity (Parts.Capacity, or the machine's cpu
// and memory), completes the capacity measured on the machine with its
// hugepages and its ephemeral storage (the size of the file system
// holding RootDir), as the kubelet's, and sizes the node's pod cgroup
// (kubepods) as the kubelet's enforceNodeAllocatableCgroups does. The
// agent calls it once, before it makes the node's cgroups and starts its
// parts; it changes capacity.
func (m *Manager) Prepare(capacity v1.ResourceList) error {
	m.capacity = capacity
	// The Node's ephemeral-storage capacity is RootDir's file system.
	if err := os.MkdirAll(m.p.RootDir, 0o750); err != nil {
		return fmt.Errorf("upkeep: creating the root directory: %w", err)
	}
	if m.p.Capacity == nil {
		if pages, err := node.ReadHugePages(""); err != nil {
			m.log.Info("Hugepages are not offered to pods", "reason", err.Error())
		} else {
			maps.Copy(m.capacity, node.HugePagesCapacity(pages))
		}
		if size, err := node.FsSize(m.p.RootDir); err != nil {
			m.log.Info("Ephemeral storage is not offered to pods", "reason", err.Error())
		} else {
			m.capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
		}
	}
	if m.p.Cgroups.Disabled || m.p.Cgroups.Allocatable != nil {
		return nil
	}
	alloc := m.nodeCgroupResources()
	if err := m.p.CgroupManager.SetAllocatable(alloc); err != nil {
		return fmt.Errorf("upkeep: sizing the node's pod cgroup: %w", err)
	}
	return nil
}

// nodeCgroupResources are the kubelet's limits of the node's pod cgroup:
// the internal capacity (the capacity, the host's process IDs as "pid",
// its hugepages) less SystemReserved and KubeReserved, or the capacity
// itself with SkipAllocatableEnforcement.
func (m *Manager) nodeCgroupResources() v1.ResourceList {
	capacity := m.capacity.DeepCopy()
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
	o := m.o
	if o.SkipAllocatableEnforcement {
		return capacity
	}
	return node.Allocatable(capacity, o.SystemReserved, o.KubeReserved)
}

// Allocatable is what the node offers pods: its capacity (Options.Node.Capacity
// or the machine's cpu and memory, known once Run started) less
// SystemReserved, KubeReserved and the hard eviction thresholds of memory
// and nodefs, the kubelet's formula. Admission checks the pods' requests
// against it.
func (m *Manager) Allocatable() v1.ResourceList {
	capacity := m.Capacity()
	o := m.o
	return node.Allocatable(capacity, o.SystemReserved, o.KubeReserved, eviction.HardReservation(m.thresholds, capacity))
}

// Capacity is the node's capacity: Parts.Capacity, or the machine's once
// Prepare measured it.
func (m *Manager) Capacity() v1.ResourceList {
	if m.capacity == nil {
		return m.p.Capacity
	}
	return m.capacity
}

// NodeConditions are the node's pressure conditions (MemoryPressure,
// DiskPressure, PIDPressure) as the eviction manager sees them.
func (m *Manager) NodeConditions() []v1.NodeConditionType {
	if m.eviction == nil {
		return nil
	}
	return m.eviction.Conditions()
}

// EvictionAdmit is the kubelet's eviction admission check over the
// agent's pressure conditions: under memory pressure BestEffort pods are
// refused (unless they tolerate the memory-pressure taint), under disk or
// PID pressure every pod but the critical ones; reason Evicted, message
// "The node had condition: [...]", and a Warning event on the pod, as the
// kubelet's rejectPod.
func (m *Manager) EvictionAdmit() admission.Handler {
	return admission.Func(func(pod *v1.Pod, _ []*v1.Pod) admission.Result {
		ok, reason, msg := eviction.Admit(pod, m.NodeConditions())
		if ok {
			return admission.Admitted()
		}
		m.p.Recorder.Event(pod, v1.EventTypeWarning, reason, msg)
		return admission.Result{Admit: false, Reason: reason, Message: msg}
	})
}

// NodeOptions gives the Node controller the reservations, the
// pressure conditions, the images and the events.
func (m *Manager) NodeOptions(o *node.Options) {
	r := m.o
	if o.SystemReserved == nil {
		o.SystemReserved = r.SystemReserved
	}
	if o.KubeReserved == nil {
		o.KubeReserved = r.KubeReserved
	}
	if o.HardEvictionReserved == nil {
		o.HardEvictionReserved = func(capacity v1.ResourceList) v1.ResourceList {
			return eviction.HardReservation(m.thresholds, capacity)
		}
	}
	if o.Pressure == nil {
		o.Pressure = m.NodeConditions
	}
	if o.Machine == nil && o.EphemeralStoragePath == "" {
		// The kubelet's ephemeral-storage capacity: its root directory's
		// file system.
		o.EphemeralStoragePath = m.p.RootDir
	}
	if o.Images == nil {
		is := m.p.Images
		o.Images = func(ctx context.Context) ([]*runtimeapi.Image, error) { return is.ListImages(ctx, nil) }
	}
	if o.Recorder == nil {
		o.Recorder = m.p.Recorder
	}
}

// AddTo adds the collectors', the eviction manager's and the log
// rotator's loops to g, those that are on.
func (m *Manager) AddTo(g *run.Group) error {
	var errs []error
	add := func(name string, on bool, r run.Runnable) {
		if on {
			errs = append(errs, g.Add(name, r))
		}
	}
	add("container gc", m.containerGC != nil, m.containerGC)
	add("image gc", m.imageGC != nil, m.imageGC)
	add("eviction manager", m.eviction != nil, m.eviction)
	add("log rotation", m.logs != nil, m.logs)
	return errors.Join(errs...)
}

// Stats is the summary provider of the agent's pods that the eviction
// manager reads; nil when the agent keeps none.
func (m *Manager) Stats() *stats.Provider { return m.stats }

// RuntimeRecovered is called when the runtime answers again after it did
// not (and after the first check): sandboxes that a crash left half-made
// are collected at once rather than at the next period.
func (m *Manager) RuntimeRecovered() {
	if c := m.containerGC; c != nil {
		c.Trigger()
	}
}

// podCgroupRoot names the cgroup that holds the pods' cgroups.
func (m *Manager) podCgroupRoot() string {
	root := m.p.Cgroups.Root
	if root == "" {
		root = "kubepods"
	}
	if filepath.IsAbs(root) {
		return filepath.Clean(root)
	}
	return "/" + filepath.Clean(root)
}

// imageFsStats are the summary's image file system figures: its size and
// free space as the image collector reads them, and the images' sizes
// (the runtime's ListImages) as used, as the runtime's ImageFsInfo counts
// them for the kubelet.
func (m *Manager) imageFsStats(ctx context.Context) (*statsapi.FsStats, error) {
	fs, err := m.imageFs(ctx)
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	out := &statsapi.FsStats{Time: now, CapacityBytes: &fs.Capacity, AvailableBytes: &fs.Available, Inodes: &fs.Inodes, InodesFree: &fs.InodesFree}
	if m.p.Images != nil {
		images, err := m.p.Images.ListImages(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("upkeep: listing images: %w", err)
		}
		var used uint64
		for _, img := range images {
			used += img.GetSize()
		}
		out.UsedBytes = &used
	}
	return out, nil
}

// selfCgroup names the agent's own cgroup, the kubelet's system container
// "kubelet": its memory controller's on cgroup v1, its unified one on v2;
// "" when unknown.
func selfCgroup() string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	unified := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				return f[2]
			}
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
		}
	}
	return unified
}
