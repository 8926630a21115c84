package podruntime

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// BackOffOptions shape an exponential back-off: Initial, doubled at each
// step up to Max, forgotten after Reset without a step.
type BackOffOptions struct {
	// Initial delay. Defaults to 10s.
	Initial time.Duration
	// Max delay. Defaults to 300s.
	Max time.Duration
	// Reset: a step more than Reset after the previous one (for a
	// container: an exit more than Reset after the previous exit, or a
	// container that ran at least Reset) starts again from Initial.
	// Defaults to 10m.
	Reset time.Duration
}

func (o *BackOffOptions) setDefaults() {
	if o.Initial <= 0 {
		o.Initial = 10 * time.Second
	}
	if o.Max <= 0 {
		o.Max = 300 * time.Second
	}
	if o.Max < o.Initial {
		o.Max = o.Initial
	}
	if o.Reset <= 0 {
		o.Reset = 10 * time.Minute
	}
}

type backOffEntry struct {
	delay time.Duration
	last  time.Time // the event time of the last step
}

// backOff is the kubelet's flowcontrol.Backoff, keyed per pod so a pod's
// entries can be dropped at once. Not safe for concurrent use: the Manager
// guards it with its mutex.
type backOff struct {
	opts    BackOffOptions
	entries map[types.UID]map[string]*backOffEntry
}

func newBackOff(opts BackOffOptions) *backOff {
	return &backOff{opts: opts, entries: map[types.UID]map[string]*backOffEntry{}}
}

func (b *backOff) get(uid types.UID, key string) *backOffEntry {
	return b.entries[uid][key]
}

func (b *backOff) expired(e *backOffEntry, event time.Time) bool {
	return event.Sub(e.last) > b.opts.Reset
}

// inBackOffSince reports whether an event at time event is still within the
// current delay at now, and returns the delay.
func (b *backOff) inBackOffSince(uid types.UID, key string, event, now time.Time) (bool, time.Duration) {
	e := b.get(uid, key)
	if e == nil || b.expired(e, event) {
		return false, 0
	}
	return now.Sub(event) < e.delay, e.delay
}

// inBackOffSinceUpdate reports whether now is within the current delay
// counted from the last step.
func (b *backOff) inBackOffSinceUpdate(uid types.UID, key string, now time.Time) (bool, time.Duration) {
	e := b.get(uid, key)
	if e == nil {
		return false, 0
	}
	return now.Sub(e.last) < e.delay, e.delay
}

// next records a step at event: the delay doubles (capped at Max), or starts
// at Initial for a new or expired entry or when reset is true.
func (b *backOff) next(uid types.UID, key string, event time.Time, reset bool) {
	m := b.entries[uid]
	if m == nil {
		m = map[string]*backOffEntry{}
		b.entries[uid] = m
	}
	e := m[key]
	switch {
	case e == nil || reset || b.expired(e, event):
		e = &backOffEntry{delay: b.opts.Initial}
		m[key] = e
	default:
		e.delay = min(2*e.delay, b.opts.Max)
	}
	e.last = event
}

// seed gives the container a back-off entry, when it has none, from what
// the runtime records of it, so that a manager that starts over a crash
// loop (an agent restarted) keeps its back-off instead of restarting the
// container at once. exited is the newest exited instance, prev the one
// before it (nil when the runtime no longer holds it).
//
// The entry is the one a manager that had run all along would hold: the
// instance with restart count n started after a back-off of
// Initial·2^(n-1), capped at Max, none for n = 0. There is nothing to seed
// when the back-off would have been reset: the instance ran for Reset or
// longer, or exited more than Reset after the one before it. When the one
// before ran for Reset or longer, its restart started again from Initial.
// The entry's last step is the previous exit, or this instance's start
// when the runtime no longer holds the previous one (the previous exit was
// before it).
func (b *backOff) seed(uid types.UID, key string, exited, prev *runtime.ContainerStatus) {
	if b.get(uid, key) != nil || exited.RestartCount <= 0 || exited.FinishedAt.IsZero() {
		return
	}
	last := exited.StartedAt
	if last.IsZero() {
		last = exited.FinishedAt
	}
	if exited.FinishedAt.Sub(last) >= b.opts.Reset {
		return
	}
	delay := b.opts.Initial
	for i := 1; i < exited.RestartCount && delay < b.opts.Max; i++ {
		delay *= 2
	}
	if prev != nil && !prev.FinishedAt.IsZero() && !prev.FinishedAt.After(exited.FinishedAt) {
		last = prev.FinishedAt
		if exited.FinishedAt.Sub(last) > b.opts.Reset {
			return
		}
		if !prev.StartedAt.IsZero() && prev.FinishedAt.Sub(prev.StartedAt) >= b.opts.Reset {
			delay = b.opts.Initial
		}
	}
	m := b.entries[uid]
	if m == nil {
		m = map[string]*backOffEntry{}
		b.entries[uid] = m
	}
	m[key] = &backOffEntry{delay: min(delay, b.opts.Max), last: last}
}

func (b *backOff) remove(uid types.UID, key string) {
	if m := b.entries[uid]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(b.entries, uid)
		}
	}
}

func (b *backOff) forget(uid types.UID) { delete(b.entries, uid) }

// gc drops the entries whose last step is older than both 2*Max and Reset:
// they would start again from Initial anyway.
func (b *backOff) gc(now time.Time) {
	horizon := max(2*b.opts.Max, b.opts.Reset)
	for uid, m := range b.entries {
		for k, e := range m {
			if now.Sub(e.last) > horizon {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(b.entries, uid)
		}
	}
}
