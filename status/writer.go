package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/run"
)

// maxAttempts bounds the reads and PATCHes of one pod in one run of the
// writer when its PATCHes conflict.
const maxAttempts = 3

// Run writes the statuses to the API server until ctx ends, then returns
// nil. It is the manager's only writer: one goroutine (the caller's),
// woken by SetPodStatus (after WriteDelay), by the end of a Hold and every
// ResyncPeriod while it holds a pod's status (with none there is nothing
// to resync, and an idle node's writer does not wake: the kubelet's ticks
// for nothing); a pod held waits for its Hold to end. For each
// pod to write it takes the pod as last read or written (with a view of
// the API server, Options.APIPod or MirrorPod, the view when it shows the
// version last read or written: the writer keeps no copy of its own), or
// as given to SetPodStatus when that is an API object, and reads it (a
// static pod's mirror pod) when it has neither; it skips it if
// the UID is not the one it has (the pod was replaced) or it is bound to
// another node, merges the status held into the stored one and sends the
// difference as a strategic-merge PATCH of the status subresource, with
// the UID and resource version read as preconditions. A pod with a
// deletion timestamp whose containers cannot run any more and whose
// written status shows none running is then deleted with grace period 0
// and its UID as a precondition. Errors are logged and the pods retried at
// the next resync; an API server that does not answer ends the run early.
//
// Without a client Run only waits for ctx. Run may be called once.
func (m *Manager) Run(ctx context.Context) error { return run.Until(ctx, m) }

// Start is Run without waiting for ctx to end (run.Starter): the writer's
// passes are a task of Options.Periodic, which the agents of one process
// can share (hollow nodes do), or without one of a goroutine of the
// Manager's own. Either way one pass runs at a time.
func (m *Manager) Start(ctx context.Context) (wait func(), err error) {
	if !m.running.CompareAndSwap(false, true) {
		return nil, errors.New("status: Run called twice")
	}
	if m.opts.Client == nil {
		return func() {}, nil
	}
	m.log.V(1).Info("Writing pod statuses to the API server", "resyncPeriod", m.opts.ResyncPeriod)
	empty := m.empty()
	w := &m.writer
	w.mu.Lock()
	defer w.mu.Unlock()
	first := periodic.Idle
	if !empty {
		w.resyncAt = time.Now().Add(m.opts.ResyncPeriod)
		first = m.opts.ResyncPeriod
	}
	if w.woken {
		first = m.opts.WriteDelay
	}
	w.task = m.opts.Periodic.Start(ctx, first, m.pass)
	return w.task.Wait, nil
}

// writer is when the writer's next pass is due.
type writer struct {
	mu   sync.Mutex
	task *periodic.Task
	// resyncAt is when the next resync is due: zero while the Manager
	// holds no status (nothing to resync, and an idle node's writer does
	// not wake); a change starts the resyncs again.
	resyncAt time.Time
	// woken: a change came since the pass began, and the next pass is due
	// WriteDelay after it.
	woken bool
}

// pass is one of the writer's passes: a resync when one is due, else the
// pods changed, or whose Hold ended. It returns when the next is due.
func (m *Manager) pass(ctx context.Context) time.Duration {
	w := &m.writer
	now := time.Now()
	w.mu.Lock()
	w.woken = false
	all := !w.resyncAt.IsZero() && !now.Before(w.resyncAt)
	if all {
		w.resyncAt = now.Add(m.opts.ResyncPeriod)
	}
	w.mu.Unlock()
	if all {
		m.resyncs.Add(1)
	}
	held := m.syncBatch(ctx, all)
	empty := all && m.empty()
	w.mu.Lock()
	defer w.mu.Unlock()
	if empty {
		w.resyncAt = time.Time{}
	}
	next := w.resyncAt
	if !held.IsZero() && (next.IsZero() || held.Before(next)) {
		next = held
	}
	if next.IsZero() {
		return periodic.Idle
	}
	return time.Until(next)
}

// poke makes the writer's next pass due WriteDelay from now, unless a
// change already did since the pass running began; it starts the resyncs
// if they stopped. It never blocks.
func (m *Manager) poke() {
	w := &m.writer
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resyncAt.IsZero() {
		w.resyncAt = time.Now().Add(m.opts.ResyncPeriod)
	}
	if w.woken {
		return
	}
	w.woken = true
	if w.task != nil {
		w.task.Reset(m.opts.WriteDelay)
	}
}

// empty reports whether the manager holds no pod's status.
func (m *Manager) empty() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pods) == 0
}

// syncBatch writes the dirty pods and, with all, every pod whose status
// differs from what was written or from what the API server shows. A pod
// held (Hold) is left dirty: syncBatch returns the earliest time a Hold of
// a pod it left ends, zero when it left none.
func (m *Manager) syncBatch(ctx context.Context, all bool) (next time.Time) {
	defer m.errs.Flush()
	var uids []types.UID
	var check []snapshot
	now := time.Now()
	m.mu.Lock()
	for uid, e := range m.pods {
		if until, ok := m.heldUntil(uid, now); ok && !e.gone {
			// Release, or the timer at until, writes it.
			if e.dirty && (next.IsZero() || until.Before(next)) {
				next = until
			}
			continue
		}
		switch {
		case e.gone:
			e.dirty = false
		case e.dirty || all && (e.version > e.written || e.heldBack || e.pod.DeletionTimestamp != nil):
			e.dirty = false
			uids = append(uids, uid)
		case all:
			check = append(check, snapshot{uid: uid, e: e, pod: e.pod, last: e.last})
		}
	}
	m.mu.Unlock()
	// Comparing with the API server's view encodes statuses: do it
	// without holding the lock.
	for _, s := range check {
		if m.drifted(s) {
			m.mu.Lock()
			if m.pods[s.uid] == s.e {
				// What the agent saw may be older than what was
				// written: read the pod.
				s.e.api, s.e.last, s.e.reread = nil, objectVersion{}, true
			}
			m.mu.Unlock()
			uids = append(uids, s.uid)
		}
	}
	slices.Sort(uids)
	for i, uid := range uids {
		if ctx.Err() != nil {
			return next
		}
		err := m.syncPod(ctx, uid)
		if err == nil {
			continue
		}
		if !isAPIStatus(err) {
			// The API server does not answer: leave the rest to the next
			// resync rather than wait for each of them.
			m.errs.Error(err, "Writing pod statuses failed; retrying at the next resync", "pods", len(uids)-i)
			return next
		}
		m.errs.ErrorFor(string(uid), err, "Writing pod status failed; retrying at the next resync", "podUID", uid)
	}
	return next
}

// snapshot is what the resync compares of a pod whose status was written.
// The status itself is read only for a pod the API server shows changed:
// at every resync, most are not, and copying every status was most of
// the resync's cost.
type snapshot struct {
	uid  types.UID
	e    *entry
	pod  *v1.Pod
	last objectVersion
}

// objectVersion names one version of an API object.
type objectVersion struct {
	uid types.UID
	rv  string
}

func versionOf(p *v1.Pod) objectVersion {
	return objectVersion{uid: p.UID, rv: p.ResourceVersion}
}

// shows reports whether p is the object at that version.
func (v objectVersion) shows(p *v1.Pod) bool {
	return v.rv != "" && p.UID == v.uid && p.ResourceVersion == v.rv
}

func isAPIStatus(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

// drifted reports, for the resync, whether a pod whose status was written
// must be written again: a static pod has a new mirror pod, or the API
// server shows (through Options.APIPod or Options.MirrorPod) a status
// other than the one held would give.
func (m *Manager) drifted(s snapshot) bool {
	var view *v1.Pod
	if podmodel.IsStatic(s.pod) {
		if m.opts.MirrorPod == nil {
			return false
		}
		mp, ok := m.opts.MirrorPod(s.pod)
		if !ok {
			return false
		}
		if s.last.uid != mp.UID {
			return true
		}
		view = mp
	} else if m.opts.APIPod != nil {
		p, ok := m.opts.APIPod(s.uid)
		if !ok || p.UID != s.uid {
			return false
		}
		view = p
	}
	if view == nil || s.last.shows(view) {
		return false
	}
	m.mu.Lock()
	status := s.e.status
	m.mu.Unlock()
	merged, _, stale := mergeForAPI(view.Status, status, m.couldRun(s.uid), time.Now())
	if stale {
		return false
	}
	patch, err := statusPatch(view, merged)
	if err != nil || patch == nil {
		return false
	}
	m.log.V(3).Info("Pod status differs in the API server", "pod", podmodel.FullName(s.pod), "podUID", s.uid)
	return true
}

// couldRun reports whether the pod's containers could still run: until
// PodTerminated.
func (m *Manager) couldRun(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.stopped[uid]
}

// anyRunning reports whether a container status shows a running container.
func anyRunning(s v1.PodStatus) bool {
	for _, cs := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for _, c := range cs {
			if c.State.Running != nil {
				return true
			}
		}
	}
	return false
}

// syncPod writes one pod's status and deletes the pod when it finished
// terminating. It returns the error of a request that failed.
func (m *Manager) syncPod(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	e, ok := m.pods[uid]
	if !ok || e.gone {
		m.mu.Unlock()
		return nil
	}
	pod, status, version, api, last, reread := e.pod, e.status, e.version, e.api, e.last, e.reread
	m.mu.Unlock()
	log := m.log.WithValues("pod", podmodel.FullName(pod), "podUID", uid)

	static := podmodel.IsStatic(pod)
	if static && m.opts.MirrorPod != nil {
		mp, ok := m.opts.MirrorPod(pod)
		if !ok {
			log.V(4).Info("Static pod has no mirror pod yet; its status waits")
			return nil
		}
		// With MirrorPod the manager holds no object (hasView). Write on
		// the mirror pod as last seen (the preconditions refuse the PATCH
		// if it is not current), unless it is the mirror last written but
		// not at the version written: the watch is behind, or another
		// writer changed it, and a PATCH on it would be refused. Read it
		// then.
		if !reread && (last.uid != mp.UID || last.shows(mp)) {
			api = mp
		}
	}
	if api != nil && pod.DeletionTimestamp != nil && api.DeletionTimestamp == nil {
		// The pod was deleted after it was read.
		api = nil
	}
	if api == nil && !reread && !static {
		switch {
		case last.rv == "" && pod.ResourceVersion != "", last.shows(pod):
			// The pod as the agent got it from the API server is as good
			// a base as a fresh read: the resource version precondition
			// refuses the PATCH if it is not current.
			api = pod
		case m.opts.APIPod != nil:
			// The API server's view, if it shows the version last
			// written; if it does not (the watch is behind, or another
			// writer changed the pod), a PATCH on it would be refused:
			// the pod is read.
			if v, ok := m.opts.APIPod(uid); ok && last.shows(v) {
				api = v
			}
		}
	}

	couldRun := m.couldRun(uid)
	var heldBack bool
	for attempt := 1; ; attempt++ {
		if api == nil {
			got, err := m.get(ctx, pod)
			if apierrors.IsNotFound(err) {
				if static {
					log.V(4).Info("Static pod has no mirror pod yet; its status waits")
				} else {
					log.V(3).Info("Pod is not in the API server any more; its status is not written")
					m.markGone(uid, e)
				}
				return nil
			}
			if err != nil {
				return err
			}
			api = got
			m.mu.Lock()
			e.reread = false
			m.mu.Unlock()
		}
		if reason := m.foreign(pod, api, static); reason != "" {
			log.V(3).Info("Not writing pod status", "reason", reason, "apiUID", api.UID)
			if !static {
				m.markGone(uid, e)
			}
			return nil
		}
		merged, held, stale := mergeForAPI(api.Status, status, couldRun, time.Now())
		if stale {
			log.V(1).Info("The API server holds a terminal phase and the status held is not terminal; not overwriting it", "phase", api.Status.Phase, "version", version)
			break
		}
		heldBack = held
		patch, err := statusPatch(api, merged)
		if err != nil {
			return err
		}
		if patch == nil {
			break
		}
		got, err := m.patch(ctx, api, patch)
		if apierrors.IsConflict(err) && attempt < maxAttempts {
			log.V(3).Info("Pod changed since it was read; reading it again")
			api = nil
			continue
		}
		if apierrors.IsNotFound(err) && !static {
			m.markGone(uid, e)
			return nil
		}
		if err != nil {
			m.forget(e)
			return err
		}
		log.V(3).Info("Wrote pod status", "version", version, "phase", got.Status.Phase, "heldBack", held)
		api = got
		break
	}

	m.mu.Lock()
	if m.pods[uid] == e {
		e.last, e.api = versionOf(api), nil
		if !m.hasView(static) {
			e.api = api
		}
		e.heldBack = heldBack
		e.written = max(e.written, version)
	}
	m.mu.Unlock()

	if static || api.DeletionTimestamp == nil || !podmodel.IsTerminal(api.Status.Phase) && anyRunning(api.Status) {
		return nil
	}
	if m.couldRun(uid) {
		return nil
	}
	return m.deletePod(ctx, uid, e, api, log)
}

// foreign says why the API object is not the one to write pod's status
// to, or "" when it is.
func (m *Manager) foreign(pod, api *v1.Pod, static bool) string {
	switch {
	case static && !podmodel.IsMirror(api):
		return "a pod that is not a mirror pod holds the static pod's name"
	case static && !podmodel.IsMirrorOf(api, pod):
		return "the mirror pod is stale"
	case static && api.DeletionTimestamp != nil:
		return "the mirror pod is being deleted"
	case !static && api.UID != pod.UID:
		return "the pod was replaced"
	case m.opts.NodeName != "" && api.Spec.NodeName != m.opts.NodeName:
		return "the pod is bound to another node"
	}
	return ""
}

func (m *Manager) markGone(uid types.UID, e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pods[uid] == e {
		e.gone, e.api, e.last, e.dirty = true, nil, objectVersion{}, false
	}
}

// forget drops the object read, so that the next write reads it again.
func (m *Manager) forget(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.api, e.last = nil, objectVersion{}
}

// hasView reports whether the manager sees the object holding a pod's
// status through a watch (Options.MirrorPod for a static pod,
// Options.APIPod for others).
func (m *Manager) hasView(static bool) bool {
	if static {
		return m.opts.MirrorPod != nil
	}
	return m.opts.APIPod != nil
}

func (m *Manager) get(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.gets.Add(1)
	got, err := m.opts.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		m.failures.Add(1)
		return nil, fmt.Errorf("status: reading pod %s: %w", podmodel.FullName(pod), err)
	}
	if err != nil {
		return nil, err
	}
	return trimHeld(got), nil
}

func (m *Manager) patch(ctx context.Context, api *v1.Pod, patch []byte) (*v1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.patches.Add(1)
	got, err := m.opts.Client.CoreV1().Pods(api.Namespace).Patch(ctx, api.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
		return trimHeld(got), nil
	case apierrors.IsConflict(err):
		m.conflicts.Add(1)
		return nil, err
	case apierrors.IsNotFound(err):
		return nil, err
	}
	m.failures.Add(1)
	return nil, fmt.Errorf("status: patching the status of pod %s: %w", podmodel.FullName(api), err)
}

// trimHeld trims the pod a PATCH (or a GET) returned, which the pod's
// entry holds as the base of its next write when the manager has no view
// of the API server (entry.api), to what the writer reads of
// it: its
// metadata without managedFields, spec.nodeName and its status. The rest
// (the spec, the server-side apply records) would cost every running pod
// a second copy of its object for as long as it runs. got is the
// client's fresh object, not shared.
func trimHeld(got *v1.Pod) *v1.Pod {
	got.ManagedFields = nil
	got.Spec = v1.PodSpec{NodeName: got.Spec.NodeName}
	return got
}

// deletePod deletes the pod that finished terminating, with grace period
// 0 and its UID as a precondition.
func (m *Manager) deletePod(ctx context.Context, uid types.UID, e *entry, api *v1.Pod, log logr.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.deletes.Add(1)
	err := m.opts.Client.CoreV1().Pods(api.Namespace).Delete(ctx, api.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(api.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.failures.Add(1)
		return fmt.Errorf("status: deleting pod %s: %w", podmodel.FullName(api), err)
	}
	log.V(1).Info("Pod terminated; deleted it from the API server")
	m.markGone(uid, e)
	return nil
}
