package probe

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/run"
)

// Metrics receives one observation per probe run. Implementations must be
// safe for concurrent use and must not block.
type Metrics interface {
	// ObserveProbe records a probe of type t that ended with r (Unknown:
	// the probe could not be run) after d.
	ObserveProbe(t Type, r Result, d time.Duration)
}

// Target names the container a probe is for.
type Target struct {
	Namespace, Pod string
	PodUID         types.UID
	Container      string
}

// TargetMetrics is an optional capability of a Metrics: when Metrics has
// it, the workers call ObserveTargetProbe instead of ObserveProbe, with
// the container probed (the kubelet's prober_probe_total labels), and
// ForgetTarget when a worker stops, so that its series can be dropped, as
// the kubelet drops them.
type TargetMetrics interface {
	ObserveTargetProbe(target Target, t Type, r Result, d time.Duration)
	ForgetTarget(target Target, t Type)
}

// Options configure NewManager.
type Options struct {
	// Runtime runs the commands of exec probes (CRI ExecSync): pass the
	// agent's runtime.RuntimeService. Required unless Prober is set.
	Runtime Execer
	// Prober runs the probes. Defaults to
	// NewDefaultProber(ProberOptions{Runtime: Runtime}).
	Prober Prober
	// Logger receives the manager's logs (named "probe"). Defaults to
	// discarding them.
	Logger logr.Logger
	// Metrics, when set, observes every probe run. Defaults to nil: none.
	Metrics Metrics
	// Alignment rounds the probe times of every worker up to a multiple
	// of it since Run started, so that probes due at about the same time
	// run in one wake-up of the process instead of one each (timer
	// coalescing: it halves the CPU time of frequent probes). A probe runs
	// at most Alignment later than the kubelet would run it. Defaults to
	// 50ms; a negative value disables it.
	Alignment time.Duration
	// Recorder, when set, receives an Unhealthy Warning event for each
	// failed probe, as the kubelet records them ("Liveness probe failed:
	// <output>"), on the pod with the container's field path
	// (spec.containers{name}). Pass the record.EventRecorder of a
	// client-go EventBroadcaster; its correlator aggregates repeated
	// events. Defaults to nil: no events.
	Recorder EventRecorder
}

// DefaultAlignment is the default of Options.Alignment.
const DefaultAlignment = 50 * time.Millisecond

func (o *Options) setDefaults() error {
	if o.Alignment == 0 {
		o.Alignment = DefaultAlignment
	}
	if o.Prober == nil {
		if o.Runtime == nil {
			return errors.New("probe: Options.Runtime is required when Options.Prober is not set")
		}
		o.Prober = NewDefaultProber(ProberOptions{Runtime: o.Runtime})
	}
	return nil
}

// align rounds t up to the next multiple of the alignment since Run
// started.
func (m *Manager) align(t time.Time) time.Time {
	a := m.opts.Alignment
	if a <= 0 {
		return t
	}
	if r := t.Sub(m.start) % a; r > 0 {
		return t.Add(a - r)
	}
	return t
}

// workerKey names one worker: one probe type of one container of a pod.
type workerKey struct {
	podUID    types.UID
	container string
	typ       Type
}

// Manager runs the liveness, readiness and startup probes of pods' containers,
// as the kubelet's prober manager does: one worker goroutine per (pod,
// container, probe type), results kept per container instance and
// published on three channels when they change.
//
// All methods are safe for concurrent use. Run starts the workers and
// returns once they all exited; pods added before Run get their workers
// when Run starts.
type Manager struct {
	statuses func(uid types.UID) (v1.PodStatus, bool)
	opts     Options
	log      logr.Logger

	liveness, readiness, startup *results

	mu      sync.Mutex
	workers map[workerKey]*worker
	ctx     context.Context // Run's; nil before Run
	start   time.Time       // when Run started
	stopped bool            // Run has returned or is returning
	wg      sync.WaitGroup
}

// NewManager checks opts and returns a Manager over statuses, which
// returns a pod's latest API status: the workers read the containers' IDs,
// states, start times and Started flags, and the pod IP, from it (pass the
// status manager's GetPodStatus). It does no I/O and starts no goroutine.
func NewManager(statuses func(uid types.UID) (v1.PodStatus, bool), opts Options) (*Manager, error) {
	if statuses == nil {
		return nil, errors.New("probe: NewManager needs the pods' statuses")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Manager{
		statuses:  statuses,
		opts:      opts,
		log:       opts.Logger.WithName("probe"),
		liveness:  newResults(),
		readiness: newResults(),
		startup:   newResults(),
		workers:   make(map[workerKey]*worker),
	}, nil
}

// Run runs the probe workers until ctx ends, then returns nil once every
// worker has exited. It may be called only once.
func (m *Manager) Run(ctx context.Context) error { return run.Until(ctx, m) }

// Start is Run without waiting for ctx to end (run.Starter): a Manager
// holds no goroutine but its probe workers'.
func (m *Manager) Start(ctx context.Context) (wait func(), err error) {
	m.mu.Lock()
	if m.ctx != nil {
		m.mu.Unlock()
		return nil, errors.New("probe: Manager.Run called twice")
	}
	m.ctx, m.start = ctx, time.Now()
	for _, w := range m.workers {
		m.startLocked(w)
	}
	m.mu.Unlock()
	return func() {
		<-ctx.Done()
		m.mu.Lock()
		m.stopped = true
		m.mu.Unlock()
		m.wg.Wait()
	}, nil
}

// Liveness delivers the changes of liveness results (capacity 20). A
// worker waits while the channel is full.
func (m *Manager) Liveness() <-chan Update { return m.liveness.updates }

// Readiness delivers the changes of readiness results (capacity 20).
func (m *Manager) Readiness() <-chan Update { return m.readiness.updates }

// Startup delivers the changes of startup results (capacity 20).
func (m *Manager) Startup() <-chan Update { return m.startup.updates }

func (m *Manager) resultsOf(t Type) *results {
	switch t {
	case Liveness:
		return m.liveness
	case Readiness:
		return m.readiness
	}
	return m.startup
}

// probedContainers are the containers that may have probes: the app
// containers and the restartable init containers (sidecars).
func probedContainers(pod *v1.Pod) []*v1.Container {
	cs := make([]*v1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		if podmodel.IsRestartableInit(&pod.Spec.InitContainers[i]) {
			cs = append(cs, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		cs = append(cs, &pod.Spec.Containers[i])
	}
	return cs
}

func probeOf(c *v1.Container, t Type) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

var probeTypes = [...]Type{Startup, Readiness, Liveness}

// AddPod starts a worker for each probe of each container of the pod (app
// containers and sidecars) that has none yet. Call it when the pod is
// admitted; calling it again for the same pod is harmless. The pod must
// not be modified afterwards.
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	for _, c := range probedContainers(pod) {
		for _, t := range probeTypes {
			p := probeOf(c, t)
			if p == nil {
				continue
			}
			key := workerKey{podUID: pod.UID, container: c.Name, typ: t}
			if _, ok := m.workers[key]; ok {
				continue
			}
			w := newWorker(m, key, pod, c, p)
			m.workers[key] = w
			if m.ctx != nil {
				m.startLocked(w)
			}
		}
	}
}

func (m *Manager) startLocked(w *worker) {
	w.ctx, w.cancel = context.WithCancel(m.ctx)
	m.wg.Go(w.run)
}

// stopLocked forgets a worker and stops it; the worker forgets its
// results as it exits.
func (m *Manager) stopLocked(key workerKey, w *worker) {
	delete(m.workers, key)
	if w.cancel != nil {
		w.cancel()
	}
}

// removeWorker is called by a worker that exits on its own.
func (m *Manager) removeWorker(w *worker) {
	m.mu.Lock()
	if m.workers[w.key] == w {
		delete(m.workers, w.key)
	}
	m.mu.Unlock()
}

// RemovePod stops the pod's workers (promptly: an ongoing probe is
// cancelled) and forgets their results. Call it when the pod is
// terminated or removed.
func (m *Manager) RemovePod(pod *v1.Pod) {
	m.stopPodWorkers(pod, probeTypes[:])
}

func (m *Manager) stopPodWorkers(pod *v1.Pod, kinds []Type) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range probedContainers(pod) {
		for _, t := range kinds {
			key := workerKey{podUID: pod.UID, container: c.Name, typ: t}
			if w, ok := m.workers[key]; ok {
				m.stopLocked(key, w)
			}
		}
	}
}

// StopLivenessAndStartup stops the liveness and startup workers of the
// pod, so that its containers are not restarted while the pod terminates
// (the kubelet calls it when a pod starts terminating). Readiness keeps
// being probed.
func (m *Manager) StopLivenessAndStartup(pod *v1.Pod) {
	m.stopPodWorkers(pod, []Type{Liveness, Startup})
}

// CleanupPods stops the workers of every pod not in desired.
func (m *Manager) CleanupPods(desired map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		if !desired[key.podUID] {
			m.stopLocked(key, w)
		}
	}
}

func (m *Manager) getWorker(key workerKey) (*worker, bool) {
	m.mu.Lock()
	w, ok := m.workers[key]
	m.mu.Unlock()
	return w, ok
}

// workerCount is the number of workers, for tests.
func (m *Manager) workerCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers)
}

// UpdatePodStatus sets the Started and Ready flags of the container
// statuses in status from the probe results, as the kubelet's prober
// manager does: a container is started when it runs and its startup probe
// succeeded (or it has none); it is ready when it is started, runs and its
// readiness probe succeeded (or it has none). An init container that is
// not a sidecar is ready once it exited 0. A container whose readiness is
// not known yet gets its readiness probe run now. Call it while computing
// the pod's status, before the pod's Ready and ContainersReady conditions
// (and its phase, which depends on sidecars' Started) are derived from the
// container statuses.
func (m *Manager) UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus) {
	for i := range status.ContainerStatuses {
		cs := &status.ContainerStatuses[i]
		started := m.isStarted(pod.UID, cs)
		cs.Started = &started
		cs.Ready = started && m.isReady(pod.UID, cs)
	}
	for i := range status.InitContainerStatuses {
		cs := &status.InitContainerStatuses[i]
		started := m.isStarted(pod.UID, cs)
		cs.Started = &started
		var c *v1.Container
		for j := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[j].Name == cs.Name {
				c = &pod.Spec.InitContainers[j]
				break
			}
		}
		if c == nil || !podmodel.IsRestartableInit(c) {
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				cs.Ready = true
			}
			continue
		}
		cs.Ready = started && m.isReady(pod.UID, cs)
	}
}

func (m *Manager) isStarted(uid types.UID, cs *v1.ContainerStatus) bool {
	if cs.State.Running == nil {
		return false
	}
	if r, ok := m.startup.get(runtimeID(cs.ContainerID)); ok {
		return r == Success
	}
	// A startup probe that has not run yet: not started.
	_, ok := m.getWorker(workerKey{podUID: uid, container: cs.Name, typ: Startup})
	return !ok
}

func (m *Manager) isReady(uid types.UID, cs *v1.ContainerStatus) bool {
	if cs.State.Running == nil {
		return false
	}
	if r, ok := m.readiness.get(runtimeID(cs.ContainerID)); ok && r == Success {
		return true
	}
	w, ok := m.getWorker(workerKey{podUID: uid, container: cs.Name, typ: Readiness})
	if !ok {
		return true // no readiness probe
	}
	w.triggerProbe()
	return false
}

// Unhealthy reports whether a container failed its liveness probe
// ("liveness") or its startup probe ("startup") and must be restarted; ""
// otherwise. containerID is the runtime's ID, with or without the
// "<runtime>://" prefix of the API status. It is a
// podruntime.UnhealthyFunc: pass it as podruntime.Options.Unhealthy.
func (m *Manager) Unhealthy(containerID string) string {
	id := runtimeID(containerID)
	if r, ok := m.liveness.get(id); ok && r == Failure {
		return string(Liveness)
	}
	if r, ok := m.startup.get(id); ok && r == Failure {
		return string(Startup)
	}
	return ""
}

// Changes returns how many probe results (of every container and probe
// type) changed or were removed so far: a caller that computed something
// from the results can tell cheaply that it still holds.
func (m *Manager) Changes() uint64 {
	return m.liveness.changes.Load() + m.readiness.changes.Load() + m.startup.changes.Load()
}
