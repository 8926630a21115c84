package status

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/logagg"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/podmodel"
)

// Observer is told of every change of a pod's status, one call at a time and
// in the order of the changes. It must not block. The status is shared
// with the one held: treat it as read-only.
type Observer func(pod *v1.Pod, status v1.PodStatus)

// The defaults of Options.
const (
	DefaultResyncPeriod   = 10 * time.Second
	DefaultWriteDelay     = 100 * time.Millisecond
	DefaultMaxHold        = 2 * time.Second
	DefaultRequestTimeout = 10 * time.Second
)

// Options for NewManager. The zero value holds the statuses locally and
// writes nothing.
type Options struct {
	// Observer, when set, is called after each change. Defaults to none.
	Observer Observer
	// OnForget, when set, is told of each pod whose status the Manager
	// forgot (RemoveOrphans: the pod is gone), one call at a time and
	// outside the Manager's lock, so that what others keep of a pod
	// (the pod start metrics) goes with it. It must not block. Defaults
	// to none.
	OnForget func(uid types.UID)
	// Client writes the statuses to the API server (Run does). Defaults to
	// nil: the statuses are only held, and Run just waits for its context.
	Client kubeclient.Interface
	// NodeName is the node the agent runs as: the status of a pod the API
	// server shows bound to another node is never written. Defaults to ""
	// (no check).
	NodeName string
	// ResyncPeriod is how often every status is checked against what was
	// written (and, with APIPod or MirrorPod, against what the API server
	// shows), and written again when they differ: failed writes are
	// retried, drift is repaired. Defaults to 10s (the kubelet's); zero or
	// negative means the default.
	ResyncPeriod time.Duration
	// WriteDelay is how long the writer waits after a status changed before
	// it writes, so that the statuses a pod start produces in quick
	// succession (Pending, then Running and Ready) go out in one PATCH.
	// Defaults to 100ms; negative writes at once.
	WriteDelay time.Duration
	// MaxHold bounds how long Hold keeps a pod's status unwritten: a pod
	// held longer (a sync that pulls an image, a runtime that is slow) has
	// its status written then, as if it were not held. Defaults to 2s;
	// zero or negative means the default.
	MaxHold time.Duration
	// RequestTimeout bounds each API request. Defaults to 10s; zero or
	// negative means the default.
	RequestTimeout time.Duration
	// MirrorPod returns the mirror pod of a static pod as the agent last saw
	// it (mirror.Manager.MirrorPod): a static pod's status is written to its
	// mirror pod, and only once MirrorPod returns one; the resync compares
	// the status with the mirror's. Defaults to reading the mirror pod by
	// the static pod's name at each write.
	MirrorPod func(static *v1.Pod) (*v1.Pod, bool)
	// Periodic, when set, runs the writer's passes as a task of the
	// Driver, which the agents of one process can share (hollow nodes
	// do): the Manager then holds no goroutine between them. Defaults to
	// nil: a goroutine of the Manager's own waits between them.
	Periodic *periodic.Driver
	// APIPod returns a pod (not static) as the agent last saw it in the API
	// server, typically from the API source's watch through the agent's pod
	// manager; the resync compares its status with the one held and
	// writes again when they differ (someone else changed it). Defaults to
	// none: the resync compares with what this manager wrote only.
	APIPod func(uid types.UID) (*v1.Pod, bool)
	// Logger receives the manager's logs. Defaults to discarding them.
	Logger logr.Logger
}

func (o *Options) setDefaults() {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.WriteDelay == 0 {
		o.WriteDelay = DefaultWriteDelay
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxHold <= 0 {
		o.MaxHold = DefaultMaxHold
	}
}

// Stats counts the API requests a Manager sent, failed ones included.
type Stats struct {
	// Gets of a pod whose status was to be written.
	Gets uint64
	// Patches of the status subresource.
	Patches uint64
	// Deletes of pods that finished terminating.
	Deletes uint64
	// Conflicts are PATCHes the API server refused because the pod changed
	// since it was read; each was retried with the pod read again.
	Conflicts uint64
	// Failures are requests that failed otherwise (the API server down, a
	// timeout, a refusal); retried at the next resync.
	Failures uint64
}

// Writes is the number of requests that change the API server's state.
func (s Stats) Writes() uint64 { return s.Patches + s.Deletes }

// Manager holds the status of every pod the agent runs and, with a
// client, writes it to the API server. Build it with NewManager; Run
// writes.
type Manager struct {
	opts Options
	log  logr.Logger
	// errs aggregates the failed writes, which recur on every pass while
	// the API server is away: logged once, then once a minute with the
	// count of those not logged.
	errs *logagg.Aggregator

	mu   sync.Mutex
	pods map[types.UID]*entry
	// holds are the pods held (Hold).
	holds map[types.UID]*hold
	// conds shares the conditions of the statuses held.
	conds conditionsCache
	// stopped holds the pods told to PodTerminated: their containers
	// cannot run any more.
	stopped map[types.UID]bool
	// notify serialises observer calls so that they arrive in order.
	notify sync.Mutex
	// writer is when the writer's next pass is due.
	writer  writer
	running atomic.Bool

	gets, patches, deletes, conflicts, failures atomic.Uint64
	// resyncs counts the writer's resync passes.
	resyncs atomic.Uint64
}

// entry is one pod's status and what the writer did with it. All fields
// are guarded by Manager.mu; the writer's fields are changed by the writer
// goroutine only.
type entry struct {
	// pod is the pod as last given to SetPodStatus.
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
	// dirty: the writer is to look at the pod at its next run.
	dirty bool

	// written is the last version written (or found in the API server).
	written uint64
	// last names the object holding the status (the pod, or a static
	// pod's mirror) at the version last read, written or found current;
	// zero when it must be read again (or, for a pod, the pod as given
	// taken as the base).
	last objectVersion
	// api is that object, held only by a manager without a view of it
	// (Options.APIPod for a pod, Options.MirrorPod for a mirror pod). With
	// one, the next write starts from the view when it shows last's
	// version: the PATCH's answer, a second copy of the pod's status,
	// is not kept for as long as the pod runs.
	api *v1.Pod
	// reread: the next write reads the object from the API server rather
	// than start from a copy it was given (the resync saw it differ).
	reread bool
	// heldBack: the last write kept a terminal phase back because
	// containers could still run.
	heldBack bool
	// gone: the pod is not in the API server any more (deleted, or
	// replaced by another UID); its status is never written again.
	gone bool
}

// NewManager returns an empty Manager. It does no I/O and starts no
// goroutine.
func NewManager(opts Options) *Manager {
	opts.setDefaults()
	log := opts.Logger.WithName("status")
	return &Manager{
		opts:    opts,
		log:     log,
		errs:    logagg.New(log, logagg.Options{}),
		pods:    make(map[types.UID]*entry),
		holds:   make(map[types.UID]*hold),
		stopped: make(map[types.UID]bool),
	}
}

// GetPodStatus returns the pod's current status, shared with the one
// held (see the package doc's Concurrency): treat it as read-only.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return e.status, true
}

// SetPodStatus records status for pod, merged with the one held (for a
// pod not held yet: with the pod's own status, or its mirror pod's, as the
// API server showed it): the start time is kept once set, a terminal phase
// (Succeeded, Failed) is never left, and the transition times of
// conditions whose status did not change are kept (a changed one without a
// time gets the current time); status.observedGeneration is the pod's
// generation. It reports whether anything changed. With
// a client, a change (and any call for a pod being deleted, or whose
// terminal phase was held back) wakes the writer; SetPodStatus never waits
// for the API server.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) bool {
	// status shares its slices and pointers with the caller's: change only
	// copies until it is kept, and keep a deep copy (most calls change
	// nothing, and copy nothing).
	if truncationNeeded(pod, &status) {
		status = *status.DeepCopy()
		truncateTerminationMessages(pod, &status)
	}
	// The generation of the spec this status was generated from
	// (PodObservedGenerationTracking, GA in the kubelet since 1.35).
	status.ObservedGeneration = pod.Generation
	m.mu.Lock()
	e, ok := m.pods[pod.UID]
	if !ok {
		e = &entry{}
		m.pods[pod.UID] = e
		status = merge(m.initialStatus(pod), status, time.Now())
	} else {
		status = merge(e.status, status, time.Now())
	}
	e.pod = pod
	changed := !ok || !sameStatus(&e.status, &status)
	if changed {
		conds := status.Conditions
		status.Conditions = nil
		status = *status.DeepCopy()
		status.Conditions = m.conds.intern(conds)
		e.status = status
		e.version++
	}
	if m.opts.Client != nil && !e.gone && (changed || pod.DeletionTimestamp != nil || e.heldBack) {
		e.dirty = true
		m.poke()
	}
	if !changed {
		m.mu.Unlock()
		return false
	}
	// Take the notify lock before releasing mu so that observers see the
	// changes of a pod in the order they were made.
	m.notify.Lock()
	m.mu.Unlock()
	defer m.notify.Unlock()
	if m.opts.Observer != nil {
		m.opts.Observer(pod, status)
	}
	return true
}

// sameStatus reports whether a and b are semantically equal. Equal
// protobuf encodings (the API's own, with map keys sorted) are equal
// statuses, and comparing them costs a twentieth of apimachinery's
// reflection: a pod's resync, which finds its status as it was, compares
// it every minute. Different encodings are compared semantically (a
// quantity may be spelt two ways).
func sameStatus(a, b *v1.PodStatus) bool {
	if plainlyDiffer(a, b) {
		return false
	}
	ab, aerr := a.Marshal()
	bb, berr := b.Marshal()
	if aerr == nil && berr == nil && bytes.Equal(ab, bb) {
		return true
	}
	return apiequality.Semantic.DeepEqual(*a, *b)
}

// plainlyDiffer reports whether a and b differ in a field that no
// spelling makes equal (a string, a count, a condition's status), as most
// changes of a pod's status do (Pending to Running at a start): neither
// status is then encoded, nor compared by reflection. False says nothing.
func plainlyDiffer(a, b *v1.PodStatus) bool {
	if a.Phase != b.Phase || a.Reason != b.Reason || a.Message != b.Message || a.PodIP != b.PodIP ||
		a.HostIP != b.HostIP || a.QOSClass != b.QOSClass || a.ObservedGeneration != b.ObservedGeneration ||
		len(a.Conditions) != len(b.Conditions) || len(a.PodIPs) != len(b.PodIPs) || len(a.HostIPs) != len(b.HostIPs) ||
		len(a.InitContainerStatuses) != len(b.InitContainerStatuses) || len(a.ContainerStatuses) != len(b.ContainerStatuses) ||
		len(a.EphemeralContainerStatuses) != len(b.EphemeralContainerStatuses) {
		return true
	}
	for i := range a.Conditions {
		if ac, bc := &a.Conditions[i], &b.Conditions[i]; ac.Type != bc.Type || ac.Status != bc.Status || ac.Reason != bc.Reason {
			return true
		}
	}
	for i := range a.ContainerStatuses {
		if ac, bc := &a.ContainerStatuses[i], &b.ContainerStatuses[i]; ac.Name != bc.Name || ac.Ready != bc.Ready ||
			ac.RestartCount != bc.RestartCount || ac.ContainerID != bc.ContainerID {
			return true
		}
	}
	return false
}

// initialStatus is what a pod's first status merges with: the status the
// API server showed (the mirror pod's for a static pod), so that the start
// time and transition times survive a restart of the agent.
func (m *Manager) initialStatus(pod *v1.Pod) v1.PodStatus {
	if podmodel.IsStatic(pod) {
		if m.opts.MirrorPod != nil {
			if mp, ok := m.opts.MirrorPod(pod); ok {
				return mp.Status
			}
		}
		return v1.PodStatus{}
	}
	return pod.Status
}

// Requeue asks the writer to write the pod's status again, reading the
// pod from the API server first: for example after its mirror pod was
// created. It does nothing for an unknown pod or without a client.
func (m *Manager) Requeue(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok || m.opts.Client == nil || e.gone {
		return
	}
	e.api, e.last, e.reread, e.dirty = nil, objectVersion{}, true, true
	m.poke()
}

// Hold keeps the pod's status unwritten until the returned release is
// called (once; later calls do nothing), or for at most Options.MaxHold,
// so that the statuses one pass of the agent over the pod sets (a sync:
// Pending as it begins, Running once it started the containers) go out as
// one write, the last. Holds nest. The pod need not have a status yet.
// Release wakes the writer when a change waits.
func (m *Manager) Hold(uid types.UID) (release func()) {
	m.mu.Lock()
	h, ok := m.holds[uid]
	if !ok {
		h = &hold{since: time.Now()}
		m.holds[uid] = h
	}
	h.n++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			h.n--
			var poke bool
			if h.n == 0 {
				delete(m.holds, uid)
				if len(m.holds) == 0 {
					// Made anew once empty: a map keeps the room it grew
					// to as it empties, and every sync in flight holds
					// its pod.
					m.holds = make(map[types.UID]*hold)
				}
				e := m.pods[uid]
				poke = e != nil && e.dirty
			}
			m.mu.Unlock()
			if poke {
				m.poke()
			}
		})
	}
}

// hold is a pod's Holds not released (n) and when the first began.
type hold struct {
	n     int
	since time.Time
}

// heldUntil reports whether the pod is held at now, and until when.
// Called with mu held.
func (m *Manager) heldUntil(uid types.UID, now time.Time) (time.Time, bool) {
	h, ok := m.holds[uid]
	if !ok {
		return time.Time{}, false
	}
	until := h.since.Add(m.opts.MaxHold)
	return until, now.Before(until)
}

// Version returns the number of changes recorded for the pod.
func (m *Manager) Version(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[uid]; ok {
		return e.version
	}
	return 0
}

// WrittenVersion returns the version of the pod's status last written to
// the API server (or found there already), 0 before any.
func (m *Manager) WrittenVersion(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[uid]; ok {
		return e.written
	}
	return 0
}

// PodTerminated records that the pod's containers are stopped and will
// not run again (the pod workers' terminated state; a pod rejected at
// admission). Until it is called for a pod, its containers could run: a
// terminal phase is not written to the API server (the phase written stays
// what it was) and a pod being deleted is not deleted.
func (m *Manager) PodTerminated(uid types.UID) {
	m.mu.Lock()
	m.stopped[uid] = true
	e := m.pods[uid]
	poke := m.opts.Client != nil && e != nil && !e.gone && (e.heldBack || e.pod.DeletionTimestamp != nil)
	if poke {
		e.dirty = true
	}
	m.mu.Unlock()
	if poke {
		m.poke()
	}
}

// DeletePodStatus forgets the pod.
func (m *Manager) DeletePodStatus(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
	delete(m.stopped, uid)
}

// RemoveOrphans forgets every pod not in keep.
func (m *Manager) RemoveOrphans(keep map[types.UID]bool) {
	var forgot []types.UID
	if m.opts.OnForget != nil {
		// Told after the unlock; RemoveOrphans is called by one
		// goroutine (housekeeping), so the calls come one at a time.
		defer func() {
			for _, uid := range forgot {
				m.opts.OnForget(uid)
			}
		}()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.pods {
		if !keep[uid] {
			delete(m.pods, uid)
			if m.opts.OnForget != nil {
				forgot = append(forgot, uid)
			}
		}
	}
	for uid := range m.stopped {
		if !keep[uid] {
			delete(m.stopped, uid)
		}
	}
	// Made anew once empty: a map keeps the room it grew to as it empties.
	if len(m.pods) == 0 {
		m.pods = make(map[types.UID]*entry)
	}
	if len(m.stopped) == 0 {
		m.stopped = make(map[types.UID]bool)
	}
}

// Stats returns the API requests sent so far.
func (m *Manager) Stats() Stats {
	return Stats{
		Gets:      m.gets.Load(),
		Patches:   m.patches.Load(),
		Deletes:   m.deletes.Load(),
		Conflicts: m.conflicts.Load(),
		Failures:  m.failures.Load(),
	}
}

// merge is the local merge of a new status with the one held.
func merge(old v1.PodStatus, status v1.PodStatus, now time.Time) v1.PodStatus {
	if podmodel.IsTerminal(old.Phase) {
		status.Phase = old.Phase
		if status.Reason == "" {
			status.Reason, status.Message = old.Reason, old.Message
		}
	}
	if old.StartTime != nil && !old.StartTime.IsZero() {
		status.StartTime = old.StartTime
	}
	// Keep the transition time of conditions whose status did not change;
	// a new or changed condition without one gets now. status's conditions
	// may be the caller's: they are copied before the first change.
	copied := false
	for i := range status.Conditions {
		c := status.Conditions[i]
		kept := false
		for _, o := range old.Conditions {
			if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
				c.LastTransitionTime = o.LastTransitionTime
				kept = true
			}
		}
		if !kept && c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
		if c.LastTransitionTime != status.Conditions[i].LastTransitionTime {
			if !copied {
				status.Conditions = slices.Clone(status.Conditions)
				copied = true
			}
			status.Conditions[i].LastTransitionTime = c.LastTransitionTime
		}
	}
	return status
}

// conditionsCache shares equal condition lists among the statuses held.
// The pods that start, or change, within one second have equal
// conditions (transition times are kept to the second), and a running
// pod's five conditions cost it over 600 bytes for as long as it runs:
// a burst of pods holds a few lists instead of one each. The lists held
// are read-only, as all the statuses held are.
//
// It remembers the lists it returned last, a few of them: a list shared
// by no status any more is dropped as newer ones come. Guarded by
// Manager.mu.
type conditionsCache struct {
	lists [conditionsCacheSize][]v1.PodCondition
	next  int
}

// conditionsCacheSize is the number of lists a conditionsCache remembers:
// enough for the few condition lists a burst interleaves (pods starting,
// pods running), few enough to compare at each change.
const conditionsCacheSize = 8

// intern returns a list held equal to conds, or a copy of conds, which it
// remembers, when none is.
func (c *conditionsCache) intern(conds []v1.PodCondition) []v1.PodCondition {
	if len(conds) == 0 {
		if conds == nil {
			return nil
		}
		return []v1.PodCondition{}
	}
	for _, l := range c.lists {
		if conditionsEqual(l, conds) {
			return l
		}
	}
	// A copy of its own (conds may be the caller's), of its length, so
	// that appending to a status's list held never writes into the list
	// shared.
	conds = slices.Clip(slices.Clone(conds))
	c.lists[c.next] = conds
	c.next = (c.next + 1) % conditionsCacheSize
	return conds
}

// conditionsEqual reports whether a and b are the same list, field by
// field, with == on every field (times to the nanosecond and in the same
// location: equal lists encode the same). A field a later API adds is
// compared too.
func conditionsEqual(a, b []v1.PodCondition) bool {
	return slices.Equal(a, b)
}
