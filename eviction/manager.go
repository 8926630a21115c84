package eviction

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
)

// Defaults, the kubelet's.
const (
	// DefaultMonitoringInterval is the kubelet's housekeeping interval,
	// the period of synchronization.
	DefaultMonitoringInterval = 10 * time.Second
	// DefaultPressureTransitionPeriod is how long a pressure condition
	// stays after its signal was last under pressure.
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// podCleanupTimeout is how long the manager waits for an evicted pod
	// to terminate before the next synchronization.
	podCleanupTimeout = 30 * time.Second
	// immediateGracePeriod is the grace period of a hard eviction.
	immediateGracePeriod = 1
)

// Recorder records events; client-go's record.EventRecorder satisfies it.
type Recorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// Options configure a Manager.
type Options struct {
	// Thresholds are the eviction thresholds. Defaults (nil) to
	// DefaultHard(); an empty, non-nil slice disables eviction (the
	// manager still runs, and never reports pressure).
	Thresholds []Threshold
	// PressureTransitionPeriod is how long a pressure condition stays
	// after its signal left the threshold. Defaults to 5m.
	PressureTransitionPeriod time.Duration
	// MonitoringInterval is the time between synchronizations. Defaults to
	// 10s.
	MonitoringInterval time.Duration
	// MaxPodGracePeriodSeconds bounds the grace period of a pod evicted
	// for a soft threshold (the kubelet's evictionMaxPodGracePeriod).
	// Defaults to 0 (the kill's own minimum applies).
	MaxPodGracePeriodSeconds int64
	// Stats reads the node's and pods' usage. Required.
	Stats StatsProvider
	// ActivePods lists the pods that may be evicted. Required.
	ActivePods func() []*v1.Pod
	// Evict stops a pod with the grace period given, status editing the
	// status it reports while it terminates (phase Failed, reason Evicted,
	// the message, a DisruptionTarget condition). Required.
	Evict func(pod *v1.Pod, gracePeriodSeconds int64, status func(*v1.PodStatus))
	// Terminated reports whether an evicted pod has terminated; the manager
	// waits for it (at most 30s) before the next synchronization. Defaults
	// to not waiting.
	Terminated func(pod *v1.Pod) bool
	// ReclaimContainers removes dead containers and sandboxes (of every
	// terminated pod) under disk pressure, before any pod is evicted.
	// Defaults to none.
	ReclaimContainers func(ctx context.Context) error
	// ReclaimImages removes the unused images under disk pressure, before
	// any pod is evicted. Defaults to none.
	ReclaimImages func(ctx context.Context) error
	// OnConditions is called with the pressure conditions whenever they
	// change. It must not block. Defaults to nothing.
	OnConditions func([]v1.NodeConditionType)
	// Recorder receives the Evicted event of each evicted pod. Defaults to
	// none.
	Recorder Recorder
	// MemoryCgroup is the cgroup v1 memory directory of the node (e.g.
	// /sys/fs/cgroup/memory): the manager arms the kernel's memory
	// threshold notifications on its usage for each memory.available
	// threshold, and synchronizes at once when one fires instead of at the
	// next interval (the kubelet's memory threshold notifier). Defaults to
	// "": polling only (cgroup v2 offers no such notification).
	MemoryCgroup string
	// DisableLocalStorageEviction turns off the eviction of pods over their
	// local storage limits: an emptyDir's sizeLimit, the pod's or a
	// container's ephemeral-storage limit (the kubelet's
	// LocalStorageCapacityIsolation, on by default).
	DisableLocalStorageEviction bool
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
	// OnEvict, when set, is told of each eviction with its signal (e.g.
	// "memory.available"), the kubelet's kubelet_evictions. It must not
	// block. Defaults to nil: none.
	OnEvict func(signal string)
}

// Manager is the kubelet's eviction manager: it observes the node's
// signals every MonitoringInterval, reports the pressure conditions, and
// under pressure reclaims node-level resources first and then evicts one
// pod per synchronization. It is safe for concurrent use.
type Manager struct {
	opts Options
	log  logr.Logger

	sync sync.Mutex // serialises synchronizations; guards state
	st   State

	mu         sync.Mutex
	conditions []v1.NodeConditionType
	lastMemory *MemoryStats // of the last synchronization

	// wake is signalled by the memory threshold notifiers.
	wake chan struct{}
}

// New returns a Manager. It does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.Stats == nil || opts.ActivePods == nil || opts.Evict == nil {
		return nil, errors.New("eviction: Options.Stats, ActivePods and Evict are required")
	}
	if opts.Thresholds == nil {
		opts.Thresholds = DefaultHard()
	}
	if err := Validate(opts.Thresholds); err != nil {
		return nil, err
	}
	opts.Thresholds = slices.Clone(opts.Thresholds)
	if opts.PressureTransitionPeriod < 0 || opts.MonitoringInterval < 0 || opts.MaxPodGracePeriodSeconds < 0 {
		return nil, errors.New("eviction: negative period")
	}
	if opts.PressureTransitionPeriod == 0 {
		opts.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if opts.MonitoringInterval == 0 {
		opts.MonitoringInterval = DefaultMonitoringInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{opts: opts, log: opts.Logger.WithName("eviction"), wake: make(chan struct{}, 1)}, nil
}

// Thresholds returns the manager's thresholds.
func (m *Manager) Thresholds() []Threshold { return slices.Clone(m.opts.Thresholds) }

// Conditions returns the node's pressure conditions (MemoryPressure,
// DiskPressure, PIDPressure), in that order.
func (m *Manager) Conditions() []v1.NodeConditionType {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.conditions)
}

// Pressure reports whether the condition holds.
func (m *Manager) Pressure(c v1.NodeConditionType) bool {
	return slices.Contains(m.Conditions(), c)
}

// Admit is the kubelet's eviction admission check on the current
// conditions (see the package function Admit).
func (m *Manager) Admit(pod *v1.Pod) (ok bool, reason, message string) {
	return Admit(pod, m.Conditions())
}

// Run synchronizes every MonitoringInterval until ctx ends, and returns
// nil then. After an eviction it waits (at most 30s) for the pod to
// terminate before the next synchronization, as the kubelet does.
func (m *Manager) Run(ctx context.Context) error {
	clk := m.opts.Clock
	notifiers := &memoryNotifiers{m: m}
	defer notifiers.stop()
	for {
		evicted, err := m.Synchronize(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Error(err, "Eviction manager: synchronize failed")
		}
		notifiers.update()
		if len(evicted) > 0 && m.opts.Terminated != nil {
			m.waitForCleanup(ctx, evicted)
		} else {
			t := clk.NewTimer(m.opts.MonitoringInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			case <-m.wake:
				t.Stop()
				m.log.V(2).Info("Eviction manager: memory threshold crossed, synchronizing")
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (m *Manager) waitForCleanup(ctx context.Context, pods []*v1.Pod) {
	clk := m.opts.Clock
	deadline := clk.Now().Add(podCleanupTimeout)
	t := clk.NewTicker(time.Second)
	defer t.Stop()
	for {
		done := true
		for _, p := range pods {
			done = done && m.opts.Terminated(p)
		}
		if done {
			return
		}
		if !clk.Now().Before(deadline) {
			m.log.Info("Eviction manager: timed out waiting for pods to be cleaned up", "pods", len(pods))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Synchronize is one pass of the kubelet's eviction manager: observe,
// update the conditions, and when a threshold is met (past its grace
// period) reclaim node-level resources for disk signals, then, if a
// threshold is still met, evict the first pod in the signal's ranking
// that is not critical. It returns the pods evicted (at most one). Stats
// that cannot be read give an error and change nothing: the manager never
// acts on missing data.
func (m *Manager) Synchronize(ctx context.Context) ([]*v1.Pod, error) {
	m.sync.Lock()
	defer m.sync.Unlock()
	if len(m.opts.Thresholds) == 0 && m.opts.DisableLocalStorageEviction {
		return nil, nil
	}
	stats, err := m.opts.Stats.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("eviction: reading stats: %w", err)
	}
	obs := Observe(stats)
	m.mu.Lock()
	m.lastMemory = stats.Memory
	m.mu.Unlock()
	now := m.opts.Clock.Now()
	next, acting := Step(now, m.opts.Thresholds, obs, m.st, m.opts.PressureTransitionPeriod)
	m.st = next
	m.setConditions(next.Conditions)
	if !m.opts.DisableLocalStorageEviction {
		if evicted := m.localStorageEviction(m.opts.ActivePods(), stats); len(evicted) > 0 {
			return evicted, nil
		}
	}
	if len(acting) == 0 {
		return nil, nil
	}
	t := acting[0]
	r := resourceOf(t.Signal)
	m.log.Info("Eviction manager: attempting to reclaim", "resourceName", r, "threshold", t.String())
	if m.reclaimNodeLevel(ctx, t, r) {
		return nil, nil
	}
	pods := m.opts.ActivePods()
	if len(pods) == 0 {
		m.log.Error(nil, "Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil, nil
	}
	pods = slices.Clone(pods)
	var podStats = stats.Pods
	Rank(t.Signal, pods, podStats)
	for _, pod := range pods {
		if IsCritical(pod) {
			continue
		}
		grace := int64(immediateGracePeriod)
		if !t.Hard() {
			grace = m.opts.MaxPodGracePeriodSeconds
			if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = min(grace, *g)
			}
		}
		var ps *PodStats
		if s, ok := podStats[pod.UID]; ok {
			ps = &s
		}
		msg := Message(t, pod, ps, m.opts.Thresholds, obs)
		if m.opts.Recorder != nil {
			m.opts.Recorder.Event(pod, v1.EventTypeWarning, Reason, msg)
		}
		m.log.Info("Eviction manager: evicting pod", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "signal", t.Signal, "message", msg)
		m.opts.Evict(pod, grace, StatusFunc(msg))
		if m.opts.OnEvict != nil {
			m.opts.OnEvict(string(t.Signal))
		}
		return []*v1.Pod{pod}, nil
	}
	m.log.Error(nil, "Eviction manager: unable to evict any pods from the node (all are critical)")
	return nil, nil
}

// StatusFunc is what an eviction does to the pod's status, as the kubelet:
// phase Failed, reason Evicted, the message, and a DisruptionTarget
// condition with reason TerminationByKubelet.
func StatusFunc(message string) func(*v1.PodStatus) { return statusFunc(message, true) }

// statusFunc is StatusFunc, with the DisruptionTarget condition or
// without (local storage eviction, as the kubelet).
func statusFunc(message string, condition bool) func(*v1.PodStatus) {
	return func(s *v1.PodStatus) {
		s.Phase = v1.PodFailed
		s.Reason = Reason
		s.Message = message
		if !condition {
			return
		}
		cond := v1.PodCondition{
			Type:    v1.DisruptionTarget,
			Status:  v1.ConditionTrue,
			Reason:  v1.PodReasonTerminationByKubelet,
			Message: message,
		}
		for i := range s.Conditions {
			if s.Conditions[i].Type == v1.DisruptionTarget {
				if s.Conditions[i].Status == cond.Status {
					cond.LastTransitionTime = s.Conditions[i].LastTransitionTime
				}
				s.Conditions[i] = cond
				return
			}
		}
		s.Conditions = append(s.Conditions, cond)
	}
}

// reclaimNodeLevel frees dead containers and unused images for a disk
// signal, and reports whether that resolved every threshold.
func (m *Manager) reclaimNodeLevel(ctx context.Context, t Threshold, r v1.ResourceName) bool {
	var funcs []func(context.Context) error
	switch t.Signal {
	case SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable, SignalImageFsInodesFree:
		for _, f := range []func(context.Context) error{m.opts.ReclaimContainers, m.opts.ReclaimImages} {
			if f != nil {
				funcs = append(funcs, f)
			}
		}
	}
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			m.log.Info("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", r, "err", err)
		}
	}
	stats, err := m.opts.Stats.Stats(ctx)
	if err != nil {
		m.log.Error(err, "Eviction manager: failed to get summary stats after resource reclaim")
		return false
	}
	if len(thresholdsMet(m.opts.Thresholds, Observe(stats), false)) == 0 {
		m.log.Info("Eviction manager: able to reduce resource pressure without evicting pods.", "resourceName", r)
		return true
	}
	return false
}

func (m *Manager) setConditions(c []v1.NodeConditionType) {
	m.mu.Lock()
	changed := !slices.Equal(m.conditions, c)
	m.conditions = slices.Clone(c)
	m.mu.Unlock()
	if changed {
		m.log.Info("Eviction manager: node conditions changed", "conditions", c)
		if m.opts.OnConditions != nil {
			m.opts.OnConditions(slices.Clone(c))
		}
	}
}

// memoryNotifiers are the memory threshold notifications Run keeps armed,
// one per memory.available threshold. Only Run's goroutine uses them.
type memoryNotifiers struct {
	m        *Manager
	armed    map[string]int64 // threshold key → bytes armed
	active   []*thresholdNotifier
	disabled bool
}

// update arms the notifications at the usage where each memory threshold
// is crossed: capacity less the threshold plus the inactive file pages,
// the kubelet's computation; unchanged values are left armed.
func (n *memoryNotifiers) update() {
	m := n.m
	if m.opts.MemoryCgroup == "" || n.disabled {
		return
	}
	if err := notifierSupported(m.opts.MemoryCgroup); err != nil {
		m.log.Info("Eviction manager: memory threshold notifications unavailable; polling only", "reason", err.Error())
		n.disabled = true
		return
	}
	m.mu.Lock()
	mem := m.lastMemory
	m.mu.Unlock()
	if mem == nil || mem.Capacity == 0 {
		return
	}
	want := map[string]int64{}
	for _, t := range m.opts.Thresholds {
		if t.Signal != SignalMemoryAvailable {
			continue
		}
		want[t.key()] = int64(mem.Capacity) - t.Value.amount(int64(mem.Capacity)) + int64(mem.InactiveFile)
	}
	if maps.Equal(want, n.armed) {
		return
	}
	n.stop()
	for key, bytes := range want {
		nt, err := newThresholdNotifier(m.opts.MemoryCgroup, bytes, m.wake)
		if err != nil {
			m.log.Error(err, "Eviction manager: arming a memory threshold notification", "threshold", key)
			continue
		}
		n.active = append(n.active, nt)
	}
	n.armed = want
}

func (n *memoryNotifiers) stop() {
	for _, nt := range n.active {
		nt.stop()
	}
	n.active, n.armed = nil, nil
}
