package pleg

import (
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// tracker is the relist's core: it remembers the state of every container
// and sandbox across relists and decides, from one listing, which pods to
// inspect, what to tell the sync loop about each, and what is owed to the
// pods a relist could not finish. It does no I/O — no runtime, cache,
// clock or channel — and is not safe for concurrent use: Generic drives
// it under its mutex, doing the I/O in between.
//
// A relist drives it in this order:
//
//	pods, dropped := t.diff(sandboxes, containers, send)
//	    (or t.begin(), t.foldWire(answers), t.end(send); t.abort() if foldWire failed)
//	for each pod, until the relist gives up:
//		if t.gone(pod): delete it from the cache, then t.commit(pod, send)
//		else inspect it: on success t.commit(pod, send), on failure t.inspectFailed(pod)
//	t.finish(the pods not handled)
//
// send offers an event to the sync loop without blocking and reports
// whether it was taken; the tracker counts and makes good what it refuses.
type tracker struct {
	// gen numbers the relists; a record whose seen is not the current
	// gen was not listed this time.
	gen  uint64
	pods map[types.UID]*podRecord
	ctrs map[string]*ctrRecord
	// retry holds what the next relist owes a pod: an inspection that
	// failed, a PodSync for events the channel could not take.
	retry map[types.UID]retryFlags
	// dirty and evBuf are scratch space reused by every relist.
	dirty []*podRecord
	evBuf []*Event
	// seenPods and seenCtrs count the records the listing being folded
	// in showed.
	seenPods, seenCtrs int
}

// podRecord is what the tracker knows of a pod across relists.
type podRecord struct {
	uid             types.UID
	name, namespace string
	ctrs            []*ctrRecord // its containers and sandboxes
	seen            uint64
	dirty           bool       // queued in tracker.dirty for this relist
	owed            retryFlags // what the previous relists owe it
}

// ctrRecord is what the tracker knows of a container or sandbox: the
// state the last committed relist saw (old) and the one this relist sees
// (cur).
type ctrRecord struct {
	id       string
	pod      *podRecord
	old, cur plegState
	seen     uint64
}

type retryFlags uint8

const (
	retryInspect retryFlags = 1 << iota // GetPodStatus failed
	retrySync                           // an event was dropped: send PodSync
)

// sendFunc offers an event to the sync loop without blocking; it reports
// whether the event was taken.
type sendFunc func(*Event) bool

func newTracker() tracker {
	return tracker{
		pods:  make(map[types.UID]*podRecord),
		ctrs:  make(map[string]*ctrRecord),
		retry: make(map[types.UID]retryFlags),
	}
}

// diff folds one listing of the runtime into the records and returns the
// pods to inspect: those with a container or sandbox whose state differs
// from the last committed one (gone ones included), those no longer
// listed at all, and those earlier relists owe something. The slice is
// valid until finish. A pod no longer known that is owed a PodSync gets
// it through send here; diff returns how many of those send refused.
//
// diff is begin, observe (after newRecord for what is new) for every
// sandbox and container, then end; a relist that reads the list answers
// in wire form (Generic.relistWire) makes those calls through foldWire.
func (t *tracker) diff(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, send sendFunc) (inspect []*podRecord, dropped int) {
	t.begin()
	for _, s := range sandboxes {
		if rec := t.ctrs[s.Id]; rec != nil {
			t.observe(rec, sandboxState(s.State))
			continue
		}
		uid := s.Labels[runtime.LabelPodUID]
		if uid == "" {
			uid = s.GetMetadata().GetUid()
		}
		if uid == "" {
			continue
		}
		t.observe(t.newRecord(s.Id, types.UID(uid), s.GetMetadata().GetName(), s.GetMetadata().GetNamespace()), sandboxState(s.State))
	}
	for _, c := range containers {
		if rec := t.ctrs[c.Id]; rec != nil {
			t.observe(rec, containerState(c.State))
			continue
		}
		uid := c.Labels[runtime.LabelPodUID]
		if uid == "" {
			continue
		}
		t.observe(t.newRecord(c.Id, types.UID(uid), c.Labels[runtime.LabelPodName], c.Labels[runtime.LabelPodNamespace]), containerState(c.State))
	}
	return t.end(send)
}

// begin starts folding a listing in: observe follows for every sandbox
// and container, then end (or abort).
func (t *tracker) begin() {
	t.gen++
	t.dirty = t.dirty[:0]
	t.seenPods, t.seenCtrs = 0, 0
}

// end finishes folding a listing in; it returns what diff returns.
func (t *tracker) end(send sendFunc) (inspect []*podRecord, dropped int) {
	if t.seenCtrs < len(t.ctrs) {
		t.sweepContainers()
	}
	if t.seenPods < len(t.pods) {
		for _, pod := range t.pods {
			if pod.seen != t.gen {
				t.markDirty(pod)
			}
		}
	}
	dropped = t.addRetries(send)
	return t.dirty, dropped
}

// abort gives up a listing begun but not ended (its answer turned out
// malformed): the next begin starts afresh. The records it created or
// observed are compared again by the next listing, and the ones it
// created that the next listing does not show are dropped unreported.
func (t *tracker) abort() {
	for _, pod := range t.dirty {
		pod.dirty = false
	}
	clear(t.dirty)
	t.dirty = t.dirty[:0]
}

// newRecord starts tracking a container or sandbox the relist has not seen
// before, and its pod if that is new too.
func (t *tracker) newRecord(id string, uid types.UID, name, namespace string) *ctrRecord {
	pod := t.pods[uid]
	if pod == nil {
		pod = &podRecord{uid: uid}
		t.pods[uid] = pod
	}
	if pod.name == "" {
		pod.name, pod.namespace = name, namespace
	}
	rec := &ctrRecord{id: id, pod: pod, old: stateNonExistent}
	pod.ctrs = append(pod.ctrs, rec)
	t.ctrs[id] = rec
	return rec
}

// observe records the state a relist lists for a container or sandbox.
func (t *tracker) observe(rec *ctrRecord, state plegState) {
	if rec.seen != t.gen {
		rec.seen = t.gen
		t.seenCtrs++
	}
	rec.cur = state
	pod := rec.pod
	if pod.seen != t.gen {
		pod.seen = t.gen
		t.seenPods++
	}
	if state != rec.old {
		t.markDirty(pod)
	}
}

func (t *tracker) markDirty(pod *podRecord) {
	if !pod.dirty {
		pod.dirty = true
		t.dirty = append(t.dirty, pod)
	}
}

// sweepContainers handles the records this relist did not list: they no
// longer exist.
func (t *tracker) sweepContainers() {
	for id, rec := range t.ctrs {
		if rec.seen == t.gen {
			continue
		}
		rec.cur = stateNonExistent
		if rec.old == stateNonExistent {
			// Appeared and vanished without ever being committed: there is
			// nothing to report.
			delete(t.ctrs, id)
			rec.pod.removeContainer(rec)
			continue
		}
		t.markDirty(rec.pod)
	}
}

// forget drops what the tracker knows of a pod that is gone from the
// runtime (an event stream saw its last object deleted) and returns the
// IDs of its records: the next relist, which does not list it either,
// has nothing to report of it. A pod queued in the relist under way is
// left to it.
func (t *tracker) forget(uid types.UID) []string {
	pod := t.pods[uid]
	if pod == nil || pod.dirty {
		return nil
	}
	delete(t.retry, uid)
	ids := make([]string, 0, len(pod.ctrs))
	for _, rec := range pod.ctrs {
		delete(t.ctrs, rec.id)
		ids = append(ids, rec.id)
	}
	delete(t.pods, uid)
	t.shrink()
	return ids
}

// shrink makes the maps anew once they are empty: a map gives back none
// of the room it grew to as it empties, and a churn of pods grows them to
// every pod and container in flight at once. Once no pod is known, the
// scratch space of the relists goes too (unless a relist under way uses
// it).
func (t *tracker) shrink() {
	if len(t.pods) == 0 {
		t.pods = make(map[types.UID]*podRecord)
		if len(t.dirty) == 0 {
			t.dirty, t.evBuf = nil, nil
		}
	}
	if len(t.ctrs) == 0 {
		t.ctrs = make(map[string]*ctrRecord)
	}
	if len(t.retry) == 0 {
		t.retry = make(map[types.UID]retryFlags)
	}
}

func (p *podRecord) removeContainer(rec *ctrRecord) {
	for i, r := range p.ctrs {
		if r == rec {
			last := len(p.ctrs) - 1
			copy(p.ctrs[i:], p.ctrs[i+1:])
			p.ctrs[last] = nil
			p.ctrs = p.ctrs[:last]
			return
		}
	}
}

// addRetries queues the pods earlier relists owe something. It sends the
// PodSync owed to pods that are gone, and returns how many of those send
// refused.
func (t *tracker) addRetries(send sendFunc) (dropped int) {
	for uid, flags := range t.retry {
		pod := t.pods[uid]
		if pod == nil {
			// The pod is gone and its removal was handled; only a PodSync
			// can still be owed.
			if flags&retrySync != 0 && !send(&Event{ID: uid, Type: PodSync}) {
				dropped++
				continue // still owed
			}
			delete(t.retry, uid)
			continue
		}
		pod.owed |= flags
		t.markDirty(pod)
		delete(t.retry, uid)
	}
	return dropped
}

// gone reports whether the last diff did not list the pod at all: it is
// to be deleted from the cache rather than inspected.
func (t *tracker) gone(pod *podRecord) bool { return pod.seen != t.gen }

// inspectFailed records that the pod could not be inspected: its records
// stay uncommitted, so the next diff finds the same changes, and it is
// inspected again then.
func (t *tracker) inspectFailed(pod *podRecord) {
	t.retry[pod.uid] = pod.owed | retryInspect
	pod.dirty, pod.owed = false, 0
}

// commit records that the pod was inspected (or, gone, deleted from the
// cache): the states this relist listed become the reference, the records
// of what no longer exists are dropped, and the pod's events go through
// send — all but ContainerChanged, as in the kubelet, and a PodSync if
// the pod is owed one and none of the others was taken. It returns how
// many events send refused; the pod is then owed a PodSync.
func (t *tracker) commit(pod *podRecord, send sendFunc) (dropped int) {
	owed := pod.owed
	pod.dirty, pod.owed = false, 0
	events := t.evBuf[:0]
	for _, rec := range pod.ctrs {
		events = appendEvents(events, pod.uid, rec.id, rec.old, rec.cur)
	}
	defer t.keepEventBuffer(events)

	kept := pod.ctrs[:0]
	for _, rec := range pod.ctrs {
		rec.old = rec.cur
		if rec.cur == stateNonExistent {
			delete(t.ctrs, rec.id)
			continue
		}
		kept = append(kept, rec)
	}
	clear(pod.ctrs[len(kept):])
	pod.ctrs = kept
	if t.gone(pod) {
		delete(t.pods, pod.uid)
	}

	sent := 0
	for _, ev := range events {
		if ev.Type == ContainerChanged {
			// As in the kubelet: not reliable, and nobody acts on it.
			continue
		}
		if send(ev) {
			sent++
		} else {
			dropped++
		}
	}
	if owed&retrySync != 0 && sent == 0 {
		if send(&Event{ID: pod.uid, Type: PodSync}) {
			sent++
		} else {
			dropped++
		}
	}
	if dropped > 0 {
		t.retry[pod.uid] |= retrySync
	}
	return dropped
}

// keepEventBuffer keeps the events slice's array for the next pod,
// without keeping its events alive.
func (t *tracker) keepEventBuffer(events []*Event) {
	clear(events)
	t.evBuf = events[:0]
}

// finish ends a relist. rest holds the pods diff returned that were
// neither committed nor failed, because the relist gave up: they keep
// what they were owed, and their records stay uncommitted, so the next
// diff finds the same changes again.
func (t *tracker) finish(rest []*podRecord) {
	for _, p := range rest {
		if p.owed != 0 {
			t.retry[p.uid] |= p.owed
		}
		p.dirty, p.owed = false, 0
	}
	clear(t.dirty)
	t.dirty = t.dirty[:0]
	t.shrink()
}
