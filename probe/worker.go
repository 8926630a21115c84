package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// maxRetries is how many times a probe that could not be run (the Prober
// returned an error) is tried in a row, the kubelet's maxProbeRetries.
const maxRetries = 3

// worker probes one container for one probe type, in its own goroutine
// (run), until its context ends, the pod terminates or the container
// terminates for good. Only its goroutine touches the fields below ctx.
type worker struct {
	m         *Manager
	key       workerKey
	pod       *v1.Pod
	container *v1.Container
	spec      *v1.Probe // with defaults
	initial   Result
	results   *results
	log       logr.Logger

	// trigger asks for a probe now (UpdatePodStatus, for readiness).
	trigger chan struct{}
	// ctx and cancel are set when the worker starts, under the manager's
	// lock; cancel stops it.
	ctx    context.Context
	cancel context.CancelFunc

	// containerID is the container's ID in the API status, runtimeID the
	// same without its "<runtime>://" prefix.
	containerID, runtimeID string
	// last is the last probe result and run how many times in a row it
	// came.
	last   Result
	streak int
	// onHold stops probing until the container ID changes (after a
	// liveness or startup failure).
	onHold bool
}

// target names the worker's container for TargetMetrics.
func (w *worker) target() Target {
	return Target{Namespace: w.pod.Namespace, Pod: w.pod.Name, PodUID: w.pod.UID, Container: w.container.Name}
}

func newWorker(m *Manager, key workerKey, pod *v1.Pod, c *v1.Container, p *v1.Probe) *worker {
	w := &worker{
		m:         m,
		key:       key,
		pod:       pod,
		container: c,
		spec:      withDefaults(p),
		results:   m.resultsOf(key.typ),
		trigger:   make(chan struct{}, 1),
		log: m.log.WithValues("probeType", key.typ, "pod", pod.Namespace+"/"+pod.Name,
			"podUID", pod.UID, "containerName", c.Name),
	}
	switch key.typ {
	case Liveness:
		w.initial = Success
	case Readiness:
		w.initial = Failure
	default:
		w.initial = Unknown
	}
	return w
}

// triggerProbe asks for a probe now, without waiting.
func (w *worker) triggerProbe() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// run probes every period until the worker is stopped. The first probe
// waits a random part of the period when the manager started less than a
// period ago, so that the probes of the pods found at start are spread;
// probe times are rounded up to the manager's alignment.
func (w *worker) run() {
	ctx := w.ctx
	defer func() {
		if w.runtimeID != "" {
			w.results.remove(w.runtimeID, w)
		}
		w.m.removeWorker(w)
		if tm, ok := w.m.opts.Metrics.(TargetMetrics); ok {
			tm.ForgetTarget(w.target(), w.key.typ)
		}
	}()

	period := time.Duration(w.spec.PeriodSeconds) * time.Second
	next := time.Now()
	if period > next.Sub(w.m.start) {
		next = next.Add(rand.N(period))
	}
	next = w.m.align(next)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			next = nextTick(next, period)
			timer.Reset(time.Until(next))
		case <-w.trigger:
		}
		if !w.doProbe(ctx) {
			return
		}
	}
}

// nextTick is the first time after now on the schedule next + k*period, as
// a ticker drops the ticks a slow receiver missed.
func nextTick(next time.Time, period time.Duration) time.Time {
	next = next.Add(period)
	if late := time.Since(next); late > 0 {
		next = next.Add((late/period + 1) * period)
	}
	return next
}

// doProbe probes the container once and records the result. It reports
// whether the worker goes on.
func (w *worker) doProbe(ctx context.Context) bool {
	status, ok := w.m.statuses(w.pod.UID)
	if !ok {
		// Not created yet, or already deleted.
		return true
	}
	if status.Phase == v1.PodFailed || status.Phase == v1.PodSucceeded {
		w.log.V(3).Info("Pod terminated, stopping probe worker", "phase", status.Phase)
		return false
	}
	cs := containerStatus(&status, w.container.Name)
	if cs == nil {
		return true // not created yet
	}
	if cs.ContainerID != w.containerID {
		// A new container: its results start over.
		if w.runtimeID != "" {
			w.results.remove(w.runtimeID, w)
		}
		w.containerID, w.runtimeID = cs.ContainerID, runtimeID(cs.ContainerID)
		w.onHold, w.last, w.streak = false, Unknown, 0
		if !w.set(ctx, w.initial) {
			return false
		}
	}
	if w.onHold {
		return true
	}
	if cs.State.Running == nil {
		if !w.set(ctx, Failure) {
			return false
		}
		// Stop if the container will not run again: its restart rules and
		// policies (a sidecar always restarts) say so and the pod is not
		// restarting all its containers.
		if cs.State.Terminated == nil {
			return true
		}
		return podmodel.ContainerShouldRestart(w.container, &w.pod.Spec, cs.State.Terminated.ExitCode) ||
			podmodel.RestartAllRequested(w.pod, &status)
	}
	if w.pod.DeletionTimestamp != nil && w.key.typ != Readiness {
		// The pod is being deleted: never restart its containers now.
		w.set(ctx, Success)
		return false
	}
	if int32(time.Since(cs.State.Running.StartedAt.Time).Seconds()) < w.spec.InitialDelaySeconds {
		return true
	}
	started := cs.Started != nil && *cs.Started
	if (w.key.typ == Startup) == started {
		// Startup probes stop once the container started (the worker stays
		// for its next instance); the others wait for it.
		return true
	}

	start := time.Now()
	req := Request{
		Type:        w.key.typ,
		Pod:         w.pod,
		PodStatus:   &status,
		Container:   w.container,
		ContainerID: w.runtimeID,
		Probe:       w.spec,
	}
	var (
		result Result
		out    string
		err    error
	)
	for range maxRetries {
		result, out, err = w.m.opts.Prober.Probe(ctx, req)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return false
	}
	ran := result
	switch {
	case err != nil:
		result = Unknown
	case result == Warning:
		result = Success
	case result != Success:
		result = Failure
	}
	if mt := w.m.opts.Metrics; mt != nil {
		if tm, ok := mt.(TargetMetrics); ok {
			tm.ObserveTargetProbe(w.target(), w.key.typ, result, time.Since(start))
		} else {
			mt.ObserveProbe(w.key.typ, result, time.Since(start))
		}
	}
	switch {
	case err != nil:
		w.log.V(1).Info("Probe errored", "err", err.Error())
		w.event(fmt.Sprintf("%s probe errored and resulted in unknown state: %v", w.key.typ.eventName(), err))
		return true
	case result == Failure:
		w.log.V(1).Info("Probe failed", "output", out)
		if ran == Failure {
			// As the kubelet: an Unknown result without an error counts
			// as a failure but records no event.
			w.event(fmt.Sprintf("%s probe failed: %s", w.key.typ.eventName(), out))
		}
	case ran == Warning:
		// As the kubelet: a success, with a ProbeWarning event.
		w.log.V(1).Info("Probe succeeded with a warning", "output", out)
		w.warn(fmt.Sprintf("%s probe warning: %s", w.key.typ.eventName(), out))
	default:
		if v := w.log.V(4); v.Enabled() {
			v.Info("Probe succeeded", "output", out)
		}
	}

	if w.last == result {
		w.streak++
	} else {
		w.last, w.streak = result, 1
	}
	if (result == Failure && w.streak < int(w.spec.FailureThreshold)) ||
		(result == Success && w.streak < int(w.spec.SuccessThreshold)) {
		return true // below the threshold: the result stands
	}
	if !w.set(ctx, result) {
		return false
	}
	if result == Failure && w.key.typ != Readiness {
		// The container will be restarted: probe again only its next
		// instance.
		w.onHold, w.streak = true, 0
	}
	return true
}

// event records an Unhealthy event on the worker's container.
func (w *worker) event(message string) {
	recordContainerEvent(w.m.opts.Recorder, w.pod, w.container, v1.EventTypeWarning, EventUnhealthy, message)
}

// warn records a ProbeWarning event on the worker's container.
func (w *worker) warn(message string) {
	recordContainerEvent(w.m.opts.Recorder, w.pod, w.container, v1.EventTypeWarning, EventProbeWarning, message)
}

// set records the container's result and publishes it when it changed,
// waiting for room on the channel. It reports false when the worker was
// stopped meanwhile.
func (w *worker) set(ctx context.Context, r Result) bool {
	if !w.results.set(w.runtimeID, r, w.pod.UID, w) {
		return true
	}
	select {
	case w.results.updates <- Update{ContainerID: w.runtimeID, Result: r, PodUID: w.pod.UID}:
		return true
	case <-ctx.Done():
		return false
	}
}

// containerStatus finds the status of the named container (app or init)
// once it has an ID.
func containerStatus(s *v1.PodStatus, name string) *v1.ContainerStatus {
	for i := range s.ContainerStatuses {
		if s.ContainerStatuses[i].Name == name && s.ContainerStatuses[i].ContainerID != "" {
			return &s.ContainerStatuses[i]
		}
	}
	for i := range s.InitContainerStatuses {
		if s.InitContainerStatuses[i].Name == name && s.InitContainerStatuses[i].ContainerID != "" {
			return &s.InitContainerStatuses[i]
		}
	}
	return nil
}
