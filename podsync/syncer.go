// Package podsync holds the default per-pod sync, the kubelet's SyncPod,
// SyncTerminatingPod, SyncTerminatedPod and SyncTerminatingRuntimePod:
// Syncer implements podworker.SyncFuncs, the calls a pod worker makes.
// A sync reports the pod's API status (package status), prepares its
// volumes (package volume) and cgroup (package cgroup), drives the
// runtime towards the pod's spec (the pod-level runtime manager) and reads
// the pod back; it applies the kubelet's active-deadline rule (a pod past
// spec.activeDeadlineSeconds fails with reason DeadlineExceeded) and
// adapts the pod cgroup to what a resize in place changes.
//
// # Usage
//
//	s, err := podsync.New(podsync.Config{
//		Runtime: podRuntime, Volumes: volumes, Cgroups: cgroups, Probes: probes,
//		Statuses: statuses, Cache: cache, Queue: queue,
//	})
//	workers, err := podworker.New(s, podworker.Options{Cache: cache, Queue: queue})
//
// To change how one pod is synced, wrap a Syncer or replace it with any
// podworker.SyncFuncs (nodekit.Options.WrapPodSyncer); every part of its
// Config is an interface of the methods it calls.
//
// # Differences from the kubelet
//
// A periodic sync of a pod whose last sync found nothing to do is skipped
// while nothing it depends on changed (see Syncer.SyncPod); every pod is
// still synced in full within 10 minutes.
//
// # Concurrency
//
// Each pod's calls come from its pod worker, one at a time; calls for
// different pods run concurrently. A Syncer starts no goroutine.
package podsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/volume"
)

// The parts Syncer uses, each with only the methods it calls. The
// default implementations are the pod-level runtime manager, volume.Manager,
// cgroup.PodManager, probe.Manager, status.Manager, pleg.Cache and
// podworker.Queue.
type (
	// PodRuntime drives one pod's sandbox and containers.
	PodRuntime interface {
		status.WaitingReasons
		RuntimeName() string
		GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error)
		SyncPodWithOptions(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, opts podruntime.SyncPodOptions) podruntime.SyncResult
		KillPod(ctx context.Context, pod *v1.Pod, running *runtime.Pod, gracePeriodOverride *int64) error
	}
	// PodVolumes prepares and releases a pod's volumes.
	PodVolumes interface {
		WaitForPodVolumes(ctx context.Context, pod *v1.Pod) (map[string]volume.Mount, error)
		ContainerMounts(pod *v1.Pod, c *v1.Container, mounts map[string]volume.Mount, env map[string]string) ([]volume.ContainerMount, error)
		ReleasePod(ctx context.Context, uid types.UID) error
	}
	// PodCgroups creates, resizes and removes a pod's cgroup.
	PodCgroups interface {
		Enabled() bool
		PodExists(pod *v1.Pod) bool
		EnsurePod(pod *v1.Pod) (cgroupParent string, err error)
		UpdatePod(pod *v1.Pod) error
		DestroyPod(ctx context.Context, uid types.UID) error
	}
	// PodProbes are the probe results a pod's status and sync read, and
	// the probe workers a terminating pod stops.
	PodProbes interface {
		status.ProbeResults
		Unhealthy(containerID string) string
		StopLivenessAndStartup(pod *v1.Pod)
		RemovePod(pod *v1.Pod)
	}
	// PodStatuses holds the pods' API statuses.
	PodStatuses interface {
		SetPodStatus(pod *v1.Pod, status v1.PodStatus) bool
		GetPodStatus(uid types.UID) (v1.PodStatus, bool)
	}
	// StatusCache records a pod's runtime status read after a sync.
	StatusCache interface {
		Set(uid types.UID, status *runtime.PodStatus, err error, timestamp time.Time)
	}
	// Queue schedules a pod's next sync.
	Queue interface {
		Enqueue(uid types.UID, delay time.Duration)
	}
	// PodResizes tell the PodResizePending condition of a pod whose
	// resize is not allocated (allocation.Manager).
	PodResizes interface {
		PendingResize(uid types.UID) *v1.PodCondition
	}
	// ObjectPods learns which pods the agent syncs, so that a new pod
	// reads its ConfigMaps and Secrets anew (objects.Cache).
	ObjectPods interface {
		RegisterPod(pod *v1.Pod)
		UnregisterPod(uid types.UID)
	}
)

// Config holds the parts of a Syncer. Every field but Events,
// HostIPs and Logger is required.
type Config struct {
	Runtime  PodRuntime
	Volumes  PodVolumes
	Cgroups  PodCgroups
	Probes   PodProbes
	Statuses PodStatuses
	Cache    StatusCache
	Queue    Queue
	// Events receives FailedMount and DeadlineExceeded events. Defaults
	// to none.
	Events runtime.EventRecorder
	// Objects, when set, is told of each pod synced and of each pod
	// terminated. Defaults to none.
	Objects ObjectPods
	// HostIPs returns the node's addresses for the pods' statuses.
	// Defaults to none.
	HostIPs func() []string
	// Resizes, when set, give the PodResizePending condition of pods
	// whose resize is not allocated. Defaults to none.
	Resizes PodResizes
	// StatusEvents, when set, reports whether the runtime's container
	// events bring each pod's status into Cache as it changes
	// (pleg.Evented.StreamsStatuses). While they do, and Cache can wait
	// for a status (pleg.StatusCache.Await), a sync that only started
	// sandboxes and containers takes the status their events brought
	// rather than reading the pod back from the runtime (see SyncPod).
	// Defaults to none: a sync that changed the pod reads it back.
	StatusEvents func() bool
	Logger       logr.Logger
}

// Syncer is the default per-pod sync, the kubelet's SyncPod,
// SyncTerminatingPod, SyncTerminatedPod and SyncTerminatingRuntimePod: it
// implements podworker.SyncFuncs. Each pod's calls come from its pod
// worker, one at a time; calls for different pods run concurrently.
//
// Replace it to change how one pod is synced while the rest of the agent
// (sources, admission, workers, PLEG, probes, housekeeping) stays: return
// a podworker.SyncFuncs of your own from nodekit.Options.WrapPodSyncer,
// which may wrap the Syncer built by New.
type Syncer struct {
	c Config

	mu sync.Mutex
	// settled holds, for each pod whose last sync found nothing to do,
	// what that sync was computed from (see SyncPod).
	settled map[types.UID]settledEntry
	// hostIPs are the host IPs of the newest entry of settled, which the
	// entries with the same host IPs share rather than one copy each.
	hostIPs *[]string
	// epoch is what the entries' until counts from.
	epoch time.Time
	// eventsLateUntil is, as time since epoch, until when syncs read their
	// pods back rather than wait for their events, after a wait for
	// events timed out (see eventWait).
	eventsLateUntil atomic.Int64
}

// settledSync is what a sync that found nothing to do was computed from.
type settledSync struct {
	pod     *v1.Pod
	runtime *runtime.PodStatus
	status  uint64 // the status manager's version of the pod's status
	probes  uint64 // the probe results' changes
	hostIPs []string
}

// settledEntry is a settledSync as Syncer.settled keeps it, one for
// every settled pod, with until when an identical resync may be skipped:
// its host IPs shared with the other entries, its bound as time since
// Syncer.epoch, so that an entry takes 48 bytes rather than 96.
type settledEntry struct {
	pod     *v1.Pod
	runtime *runtime.PodStatus
	status  uint64
	probes  uint64
	hostIPs *[]string
	until   time.Duration
	// generated: the entry is what the API status held was generated
	// from after a sync that did something (its read back), not a sync
	// that found nothing to do: a sync from the same inputs takes that
	// status rather than generate it again, and still drives the runtime.
	generated bool
}

// fullResyncPeriod bounds how long a pod's periodic syncs may be skipped
// because nothing they depend on changed; each pod's bound is drawn in
// [fullResyncPeriod/2, fullResyncPeriod), so that the full syncs of many
// pods spread over time rather than coming together.
const fullResyncPeriod = 10 * time.Minute

// statusVersions is the optional capability of PodStatuses that counts
// the changes of a pod's status (status.Manager has it).
type statusVersions interface {
	Version(uid types.UID) uint64
}

// cfsPeriod is the optional capability of PodCgroups that gives the CFS
// period of the pod cgroups, which their containers share
// (cgroup.PodManager has it).
type cfsPeriod interface {
	CPUCFSQuotaPeriod() time.Duration
}

// probeChanges is the optional capability of PodProbes that counts the
// changes of the probe results (probe.Manager has it).
type probeChanges interface {
	Changes() uint64
}

var _ podworker.SyncFuncs = (*Syncer)(nil)

// New checks c and returns a Syncer over its parts.
func New(c Config) (*Syncer, error) {
	if c.Runtime == nil || c.Volumes == nil || c.Cgroups == nil || c.Probes == nil || c.Statuses == nil || c.Cache == nil || c.Queue == nil {
		return nil, errors.New("podsync: Config needs Runtime, Volumes, Cgroups, Probes, Statuses, Cache and Queue")
	}
	if c.Events == nil {
		c.Events = discardEvents{}
	}
	if c.Objects == nil {
		c.Objects = noObjects{}
	}
	return &Syncer{c: c, settled: make(map[types.UID]settledEntry), epoch: time.Now()}, nil
}

// SyncPod implements podworker.SyncFuncs: report the status, then drive the
// runtime towards the pod's spec.
//
// The kubelet syncs every pod in full every minute. Here a periodic sync
// (podworker.SyncPodSync) of a pod whose last sync found nothing to do is
// skipped when nothing it depends on changed since: the same pod object,
// the same runtime status in the cache, the same API status, no probe
// result changed, the same host IPs, no resize pending and no active
// deadline. A drift the agent would see (a container that died, a spec or
// status changed) changes one of them; what it would not see (a pod
// cgroup removed behind its back) is fixed by the full sync every pod
// still gets at least every 10 minutes, at a time of its own. A sync from
// the same inputs as the API status a sync that did something generated
// from what it read back (the sync the runtime's events bring after a
// start) takes that status instead of generating it again, and drives the
// runtime as any sync.
//
// The statuses a sync sets go out to the API server as one write, its
// last (status.Manager.Hold, when PodStatuses has it): a start writes
// Running, not Pending first.
func (s *Syncer) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error) {
	s.c.Objects.RegisterPod(pod)
	key, keyed := s.settledKey(pod, podStatus)
	if keyed && updateType == podworker.SyncPodSync && s.stillSettled(pod.UID, key) {
		return false, nil
	}
	if h, ok := s.c.Statuses.(statusHolder); ok {
		// The statuses this sync sets (the one it starts from, the one
		// read back after it started containers) go out as one write.
		defer h.Hold(pod.UID)()
	}
	settled := false
	// readBack is the runtime status the sync read back and generated
	// the API status from, with what that generation depended on.
	var readBack *runtime.PodStatus
	var readKey settledSync
	defer func() {
		if readBack != nil && keyed && !settled {
			// The next sync from the same inputs generates the same API
			// status: it takes the one held.
			if k, ok := s.settledKey(pod, readBack); ok {
				readKey.status = k.status
				s.generated(pod.UID, readKey)
				return
			}
		}
		if !settled || !keyed {
			s.unsettle(pod.UID)
			return
		}
		// The probe results and host IPs are those counted before this
		// sync read them: one that changed while it ran makes the next
		// sync run. The API status is the one this sync wrote.
		end, ok := s.settledKey(pod, podStatus)
		if ok {
			end.probes, end.hostIPs = key.probes, key.hostIPs
			s.settle(pod.UID, end)
		} else {
			s.unsettle(pod.UID)
		}
	}()
	var pastDeadline bool
	var apiStatus v1.PodStatus
	if keyed && s.generatedFrom(pod.UID, key) {
		apiStatus, _ = s.c.Statuses.GetPodStatus(pod.UID)
	} else {
		apiStatus = s.setStatusMerged(pod, podStatus, false, s.activeDeadline(pod, &pastDeadline))
	}
	if podmodel.IsTerminal(apiStatus.Phase) {
		if pastDeadline {
			s.killAtDeadline(ctx, pod, podStatus)
		}
		return true, nil
	}
	mounts, err := s.c.Volumes.WaitForPodVolumes(ctx, pod)
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		reason, msg := volume.ReasonFailedMount, "Unable to attach or mount volumes: "
		if errors.Is(err, volume.ErrPodDirectory) {
			reason, msg = volume.ReasonFailedToMakePodDataDirectories, "error making pod data directories: "
		}
		s.c.Logger.Error(err, "Unable to attach or mount volumes for pod; skipping pod", "pod", podmodel.FullName(pod), "podUID", pod.UID, "reason", reason)
		s.c.Events.Event(runtime.PodReference(pod, ""), v1.EventTypeWarning, reason, msg+err.Error())
		s.setStatus(pod, podStatus, false, func(st *v1.PodStatus) {
			st.Reason, st.Message = reason, err.Error()
		})
		return false, err
	}
	cgroupParent, err := s.ensureCgroup(pod, updateType)
	if err != nil {
		s.c.Logger.Error(err, "Unable to create the pod's cgroup; skipping pod", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		return false, err
	}
	restartAll := podmodel.AllContainersRestarting(apiStatus)
	result := s.c.Runtime.SyncPodWithOptions(ctx, pod, withStatusIPs(pod, podStatus, apiStatus), podruntime.SyncPodOptions{
		CgroupParent:         cgroupParent,
		Unhealthy:            s.c.Probes.Unhealthy,
		HostIPs:              s.c.HostIPs,
		Started:              startedFromStatus(apiStatus),
		RestartAllContainers: restartAll,
		PodCgroup:            podCgroupFor(s.c.Cgroups),
		CPUCFSQuotaPeriod:    s.cfsPeriod(),
		Mounts: func(pod *v1.Pod, c *v1.Container, env map[string]string) ([]podruntime.Mount, error) {
			cms, err := s.c.Volumes.ContainerMounts(pod, c, mounts, env)
			if err != nil {
				return nil, err
			}
			out := make([]podruntime.Mount, len(cms))
			for i, m := range cms {
				out[i] = podruntime.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly, Propagation: m.Propagation}
			}
			return out, nil
		},
	})
	// Read the pod back at once, rather than waiting for the next relist,
	// so that its status shows what this sync did. The cache takes it only
	// if nothing newer arrived meanwhile. A sync that did nothing (a
	// resync of a pod as it should be) leaves the status it started from
	// current: reading it again would cost a pod's worth of runtime calls
	// for every pod at every resync. A runtime that knows what the sync
	// created reads those objects and the ones the pod had, without
	// listing the pod's (see podruntime.Manager.PodStatusAfterSync).
	if len(result.Results) > 0 {
		// What the generation depends on beside the status version,
		// counted before it reads them.
		readKey, _ = s.settledKey(pod, nil)
		if rb := s.readBack(ctx, pod, podStatus, result); rb != nil {
			readBack, readKey.runtime = rb, rb
		}
	}
	if restartAll && result.Err() == nil && result.RemovedContainers() {
		// The containers are gone: start the pod over at once.
		s.c.Queue.Enqueue(pod.UID, 0)
	}
	settled = len(result.Results) == 0 && !restartAll
	return false, s.syncError(pod, result)
}

// withStatusIPs returns podStatus, or for a hostNetwork pod the runtime
// gives no IP, a copy of it with the pod IPs of the API status (the
// node's), as the kubelet's SyncPod: its containers' status.podIP and
// status.podIPs are the node's addresses.
func withStatusIPs(pod *v1.Pod, podStatus *runtime.PodStatus, apiStatus v1.PodStatus) *runtime.PodStatus {
	if !pod.Spec.HostNetwork || podStatus == nil || len(podStatus.IPs) > 0 || len(apiStatus.PodIPs) == 0 {
		return podStatus
	}
	cp := *podStatus
	cp.IPs = make([]string, len(apiStatus.PodIPs))
	for i, ip := range apiStatus.PodIPs {
		cp.IPs[i] = ip.IP
	}
	return &cp
}

// cfsPeriod is the pod cgroups' CFS period, 0 (the runtime manager's
// default) when the PodCgroups do not say.
func (s *Syncer) cfsPeriod() time.Duration {
	if c, ok := s.c.Cgroups.(cfsPeriod); ok {
		return c.CPUCFSQuotaPeriod()
	}
	return 0
}

// settledKey is what a sync of pod depends on beyond its spec and runtime
// status; false when the sync cannot be skipped whatever changed: a
// deadline or a pending resize (whose syncs depend on time), or parts
// that cannot count their changes.
func (s *Syncer) settledKey(pod *v1.Pod, podStatus *runtime.PodStatus) (settledSync, bool) {
	sv, ok := s.c.Statuses.(statusVersions)
	if !ok || pod.Spec.ActiveDeadlineSeconds != nil {
		return settledSync{}, false
	}
	pc, ok := s.c.Probes.(probeChanges)
	if !ok {
		return settledSync{}, false
	}
	if s.c.Resizes != nil && s.c.Resizes.PendingResize(pod.UID) != nil {
		return settledSync{}, false
	}
	k := settledSync{pod: pod, runtime: podStatus, status: sv.Version(pod.UID), probes: pc.Changes()}
	if s.c.HostIPs != nil {
		k.hostIPs = s.c.HostIPs()
	}
	return k, true
}

// stillSettled reports whether the pod's last sync found nothing to do,
// from the same inputs as key, within its full resync bound.
func (s *Syncer) stillSettled(uid types.UID, key settledSync) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.settled[uid]
	return ok && !e.generated && e.pod == key.pod && e.runtime == key.runtime && e.status == key.status &&
		e.probes == key.probes && slices.Equal(*e.hostIPs, key.hostIPs) && time.Since(s.epoch) < e.until
}

// generatedFrom reports whether the API status held for the pod was
// generated, after its last sync, from the inputs of key: generating it
// again would give the same. After a start of thousands of pods, the
// syncs their runtime's events bring (the containers started) then cost
// no API status each.
func (s *Syncer) generatedFrom(uid types.UID, key settledSync) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.settled[uid]
	return ok && e.generated && e.pod == key.pod && e.runtime == key.runtime && e.status == key.status &&
		e.probes == key.probes && slices.Equal(*e.hostIPs, key.hostIPs)
}

// generated records what the API status held for the pod was generated
// from after a sync that did something.
func (s *Syncer) generated(uid types.UID, key settledSync) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := settledEntry{pod: key.pod, runtime: key.runtime, status: key.status, probes: key.probes, generated: true}
	if s.hostIPs == nil || !slices.Equal(*s.hostIPs, key.hostIPs) {
		ips := slices.Clone(key.hostIPs)
		s.hostIPs = &ips
	}
	e.hostIPs = s.hostIPs
	s.settled[uid] = e
}

// settle records that a sync of the pod from key found nothing to do.
// The full resync bound of a pod already settled is kept.
func (s *Syncer) settle(uid types.UID, key settledSync) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := settledEntry{pod: key.pod, runtime: key.runtime, status: key.status, probes: key.probes}
	now := time.Since(s.epoch)
	if old, ok := s.settled[uid]; ok && now < old.until {
		e.until = old.until
	} else {
		e.until = now + fullResyncPeriod/2 + rand.N(fullResyncPeriod/2)
	}
	if s.hostIPs == nil || !slices.Equal(*s.hostIPs, key.hostIPs) {
		ips := slices.Clone(key.hostIPs)
		s.hostIPs = &ips
	}
	e.hostIPs = s.hostIPs
	s.settled[uid] = e
}

func (s *Syncer) unsettle(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.settled, uid)
	if len(s.settled) == 0 {
		// Made anew once empty: a map keeps the room it grew to as it
		// empties, and a churn grows it to every pod settled at once.
		s.settled = make(map[types.UID]settledEntry)
	}
}

// ensureCgroup creates the pod's cgroup and returns the sandbox's cgroup
// parent. A resize changes an existing cgroup in the runtime's sync
// (podruntime.SyncPodOptions.PodCgroup), in order with the containers.
func (s *Syncer) ensureCgroup(pod *v1.Pod, _ podworker.UpdateType) (string, error) {
	if !s.c.Cgroups.Enabled() {
		return "", nil
	}
	return s.c.Cgroups.EnsurePod(pod)
}

// syncError turns a sync result into the worker's error. A container in
// back-off is not an error of the sync: the pod is queued again for when the
// back-off ends.
func (s *Syncer) syncError(pod *v1.Pod, result podruntime.SyncResult) error {
	err := result.Err()
	if err == nil {
		return nil
	}
	if result.OnlyBackOff() {
		s.c.Queue.Enqueue(pod.UID, time.Until(result.NextRetry()))
		return nil
	}
	return err
}

// statusHolder is the optional capability of PodStatuses that keeps a
// pod's status unwritten while a sync runs (status.Manager has it).
type statusHolder interface {
	Hold(uid types.UID) (release func())
}

// syncStatusReader is the optional capability of PodRuntime that reads a
// pod back after a sync without listing it (podruntime.Manager has it).
type syncStatusReader interface {
	PodStatusAfterSync(ctx context.Context, uid types.UID, name, namespace string, prev *runtime.PodStatus, result podruntime.SyncResult) (*runtime.PodStatus, bool, error)
}

// readBack reads the pod's status after a sync from podStatus that
// returned result, stores it in the cache and reports the API status; or,
// when the runtime's events bring the status (awaitEvents), reports the
// status they brought. It returns the status read, nil when it could not
// read it.
func (s *Syncer) readBack(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, result podruntime.SyncResult) *runtime.PodStatus {
	if st, ok := s.awaitEvents(ctx, pod.UID, result); ok {
		s.setStatus(pod, st, false, nil)
		return st
	}
	r, ok := s.c.Runtime.(syncStatusReader)
	if !ok {
		return s.refresh(ctx, pod, false, nil)
	}
	ts := time.Now()
	st, ok, err := r.PodStatusAfterSync(ctx, pod.UID, pod.Name, pod.Namespace, podStatus, result)
	if !ok {
		return s.refresh(ctx, pod, false, nil)
	}
	return s.store(ctx, pod, st, err, ts, false, nil)
}

// statusAwaiter is the optional capability of StatusCache that waits for
// a status of a pod (pleg.StatusCache has it).
type statusAwaiter interface {
	Await(ctx context.Context, uid types.UID, cond func(*runtime.PodStatus) bool) (*runtime.PodStatus, error)
}

// eventWait bounds how long a sync waits for the runtime's events to show
// what it started before it reads the pod itself. The wait ends sooner
// when the events stop bringing statuses (the stream broke: the relist
// that takes over refreshes the cache, which wakes the wait), and a kill
// of the pod cancels it with the sync. Events late by more than that (a
// runtime or agent swamped, or a runtime whose clock is behind the
// agent's, so that its events look older than the agent's last read of
// the pod) cost a read, never a wrong status; and for eventsLateBackOff
// after such a wait, syncs read their pods back at once.
const (
	eventWait         = 10 * time.Second
	eventsLateBackOff = time.Minute
)

// awaitEvents returns the pod's status from the cache once the runtime's
// events show everything the sync that returned result did, when they
// bring statuses and result only started things (podruntime.SyncResult.
// OnlyStarts); false when the pod must be read instead.
func (s *Syncer) awaitEvents(ctx context.Context, uid types.UID, result podruntime.SyncResult) (*runtime.PodStatus, bool) {
	a, ok := s.c.Cache.(statusAwaiter)
	if !ok || s.c.StatusEvents == nil || ctx.Err() != nil || !result.OnlyStarts() ||
		time.Since(s.epoch) < time.Duration(s.eventsLateUntil.Load()) || !s.c.StatusEvents() {
		return nil, false
	}
	wctx, cancel := context.WithTimeout(ctx, eventWait)
	defer cancel()
	stopped := false // the events stopped bringing statuses meanwhile
	st, err := a.Await(wctx, uid, func(st *runtime.PodStatus) bool {
		if st != nil && result.ShownIn(st) {
			return true
		}
		stopped = !s.c.StatusEvents()
		return stopped
	})
	if err != nil && ctx.Err() == nil {
		until := time.Since(s.epoch) + eventsLateBackOff
		if prev := s.eventsLateUntil.Swap(int64(until)); time.Since(s.epoch) >= time.Duration(prev) {
			s.c.Logger.Info("Container events late; pods are read back after their syncs for a while",
				"podUID", uid, "waited", eventWait, "for", eventsLateBackOff)
		}
	}
	return st, err == nil && !stopped
}

// refresh reads the pod's status from the runtime, stores it in the cache
// and reports the API status.
func (s *Syncer) refresh(ctx context.Context, pod *v1.Pod, terminal bool, edit func(*v1.PodStatus)) *runtime.PodStatus {
	ts := time.Now()
	st, err := s.c.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	return s.store(ctx, pod, st, err, ts, terminal, edit)
}

// store puts the pod's status read at ts (or the error reading it) in
// the cache and reports the API status.
func (s *Syncer) store(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, err error, ts time.Time, terminal bool, edit func(*v1.PodStatus)) *runtime.PodStatus {
	if err != nil {
		if ctx.Err() == nil {
			s.c.Logger.Error(err, "Reading pod status", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		}
		return nil
	}
	s.c.Cache.Set(pod.UID, st, nil, ts)
	s.setStatus(pod, st, terminal, edit)
	return st
}

// setStatus generates the pod's API status, once per sync, and hands it to
// the status manager.
func (s *Syncer) setStatus(pod *v1.Pod, podStatus *runtime.PodStatus, terminal bool, edit func(*v1.PodStatus)) {
	in := status.Input{
		Pod:         pod,
		Runtime:     podStatus,
		RuntimeName: s.c.Runtime.RuntimeName(),
		Probes:      s.c.Probes,
		Waiting:     s.c.Runtime,
		Terminal:    terminal,
	}
	if s.c.Resizes != nil {
		in.ResizePending = s.c.Resizes.PendingResize(pod.UID)
	}
	in.PodCgroup = statusPodCgroup(s.c.Cgroups, pod)
	if prev, ok := s.c.Statuses.GetPodStatus(pod.UID); ok {
		in.Previous = &prev
	}
	if s.c.HostIPs != nil {
		in.HostIPs = s.c.HostIPs()
	}
	st := status.Generate(in)
	if st.StartTime == nil {
		now := metav1.Now()
		st.StartTime = &now
	}
	if edit != nil {
		// A copy for edit, which may keep its argument: st itself stays
		// on the stack.
		e := st
		edit(&e)
		st = e
	}
	s.c.Statuses.SetPodStatus(pod, st)
}

// setStatusMerged is setStatus, returning the status as merged in the
// status manager.
func (s *Syncer) setStatusMerged(pod *v1.Pod, podStatus *runtime.PodStatus, terminal bool, edit func(*v1.PodStatus)) v1.PodStatus {
	s.setStatus(pod, podStatus, terminal, edit)
	got, _ := s.c.Statuses.GetPodStatus(pod.UID)
	return got
}

// SyncTerminatingPod implements podworker.SyncFuncs: stop every container of
// the pod within the grace period.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, edit func(*v1.PodStatus)) error {
	s.unsettle(pod.UID)
	s.c.Probes.StopLivenessAndStartup(pod)
	s.setStatus(pod, podStatus, false, edit)
	if err := s.c.Runtime.KillPod(ctx, pod, runtime.RunningPod(podStatus), &gracePeriod); err != nil {
		return fmt.Errorf("podsync: stopping pod %s: %w", podmodel.FullName(pod), err)
	}
	s.refresh(ctx, pod, true, edit)
	return nil
}

// SyncTerminatingRuntimePod implements podworker.SyncFuncs: stop a pod known
// only from the runtime.
func (s *Syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *runtime.Pod) error {
	if err := s.c.Runtime.KillPod(ctx, nil, rp, nil); err != nil {
		return fmt.Errorf("podsync: stopping orphaned pod %s/%s: %w", rp.Namespace, rp.Name, err)
	}
	return nil
}

// SyncTerminatedPod implements podworker.SyncFuncs: the pod's containers
// stopped, so its volumes, cgroup and directory are released. Its runtime
// objects stay (for their exit codes) until the pod is gone from its
// source, when housekeeping removes them; housekeeping also shrinks the
// QoS cgroups.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error {
	s.unsettle(pod.UID)
	s.setStatus(pod, podStatus, true, nil)
	s.c.Probes.RemovePod(pod)
	if err := s.c.Volumes.ReleasePod(ctx, pod.UID); err != nil {
		return fmt.Errorf("podsync: releasing the volumes of pod %s: %w", podmodel.FullName(pod), err)
	}
	if err := s.c.Cgroups.DestroyPod(ctx, pod.UID); err != nil {
		return fmt.Errorf("podsync: removing the cgroup of pod %s: %w", podmodel.FullName(pod), err)
	}
	s.c.Objects.UnregisterPod(pod.UID)
	return nil
}

// discardEvents is an EventRecorder that drops every event.
type discardEvents struct{}

func (discardEvents) Event(apiruntime.Object, string, string, string) {}

// noObjects is an ObjectPods that keeps nothing.
type noObjects struct{}

func (noObjects) RegisterPod(*v1.Pod)     {}
func (noObjects) UnregisterPod(types.UID) {}
