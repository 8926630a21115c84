// Package logagg aggregates repeated error lines, so that an error that
// recurs on every pass or every event (a full event channel, a runtime or
// an API server that is down) cannot flood the log when the operator most
// needs to read it.
//
// The first occurrence of a line is logged at once. Further occurrences
// within Options.Interval are counted, not logged; the next occurrence
// after the interval, or Flush once the interval has passed, logs one line
// that carries their count under the key "suppressed". A line is known by
// its message, or by its message and a key the caller gives (a pod's UID),
// so that one pod's failures do not hide another's.
//
// # Usage
//
//	errs := logagg.New(log, logagg.Options{})
//	for {
//		if err := relist(ctx); err != nil {
//			errs.Error(err, "relist failed")
//		}
//		errs.Flush()
//	}
//
// # Concurrency
//
// An Aggregator is safe for concurrent use. It logs outside its lock.
//
// # Memory
//
// An Aggregator keeps one record per line that occurred within the last
// interval (or has a count not yet logged): at most the number of distinct
// lines (and keys) logged in one interval. The room they took goes once
// they are forgotten.
package logagg

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// DefaultInterval is the default Options.Interval: the kubelet's delay
// between two identical runtime errors.
const DefaultInterval = time.Minute

// Options configure an Aggregator. The zero value is usable.
type Options struct {
	// Interval is the least time between two lines of one message (and
	// key). Defaults to DefaultInterval; a negative value logs every line.
	Interval time.Duration
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

// Aggregator logs repeated error lines at most once per interval each,
// with the count of those it did not log. Make one with New.
type Aggregator struct {
	log      logr.Logger
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	lines map[lineKey]*line
	// peak is the most lines held since lines was made (see gcLocked).
	peak int
}

type lineKey struct{ msg, key string }

// line is what an Aggregator knows of one line.
type line struct {
	logged     time.Time // when it was last logged
	suppressed int       // occurrences since, not logged
	// The last suppressed occurrence, for Flush.
	err error
	kv  []any
}

// New returns an Aggregator that logs on log at the error level. It starts
// no goroutine.
func New(log logr.Logger, opts Options) *Aggregator {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Aggregator{log: log, interval: opts.Interval, now: opts.Now, lines: map[lineKey]*line{}}
}

// Error logs err with msg and keysAndValues, as logr.Logger.Error does,
// unless a line of msg was logged less than an interval ago; then it only
// counts it. A line logged after others were counted carries their count
// ("suppressed").
func (a *Aggregator) Error(err error, msg string, keysAndValues ...any) {
	a.ErrorFor("", err, msg, keysAndValues...)
}

// ErrorFor is Error for the line of msg and key: lines of one message with
// different keys are aggregated apart.
func (a *Aggregator) ErrorFor(key string, err error, msg string, keysAndValues ...any) {
	if a.interval < 0 {
		a.log.Error(err, msg, keysAndValues...)
		return
	}
	now := a.now()
	a.mu.Lock()
	k := lineKey{msg, key}
	l := a.lines[k]
	if l != nil && now.Sub(l.logged) < a.interval {
		l.suppressed++
		l.err, l.kv = err, keysAndValues
		a.mu.Unlock()
		return
	}
	suppressed := 0
	if l == nil {
		l = &line{}
		a.lines[k] = l
		a.peak = max(a.peak, len(a.lines))
	}
	suppressed, l.suppressed = l.suppressed, 0
	l.logged, l.err, l.kv = now, nil, nil
	a.gcLocked(now)
	a.mu.Unlock()
	a.emit(err, msg, keysAndValues, suppressed)
}

// Flush logs, for each line whose occurrences were counted and last logged
// an interval ago or more, one line with the last of them and their count,
// and forgets the lines that occurred no more. Call it periodically (on
// each pass of a loop) so that the count of a burst is not held back until
// the line recurs.
func (a *Aggregator) Flush() {
	type pending struct {
		msg        string
		err        error
		kv         []any
		suppressed int
	}
	var out []pending
	now := a.now()
	a.mu.Lock()
	for k, l := range a.lines {
		if l.suppressed == 0 || now.Sub(l.logged) < a.interval {
			continue
		}
		out = append(out, pending{k.msg, l.err, l.kv, l.suppressed})
		l.logged, l.suppressed, l.err, l.kv = now, 0, nil, nil
	}
	a.gcLocked(now)
	a.mu.Unlock()
	for _, p := range out {
		a.emit(p.err, p.msg, p.kv, p.suppressed)
	}
}

// gcLocked forgets the lines logged an interval ago or more with nothing
// counted since: their next occurrence is logged as a first one would be.
func (a *Aggregator) gcLocked(now time.Time) {
	for k, l := range a.lines {
		if l.suppressed == 0 && now.Sub(l.logged) >= a.interval {
			delete(a.lines, k)
		}
	}
	// A map gives back none of the room it grew to as it empties, and
	// lines keyed by pod grow it to every pod that failed within an
	// interval (a churn of pods failing their syncs): once it holds a
	// quarter of its peak or less, the lines move to a map of their size.
	if a.peak > minShrink && len(a.lines) <= a.peak/4 {
		lines := make(map[lineKey]*line, len(a.lines))
		for k, l := range a.lines {
			lines[k] = l
		}
		a.lines, a.peak = lines, len(lines)
	}
}

// minShrink is the peak of lines below which gcLocked leaves the map be:
// its room is small, and remaking it costs more.
const minShrink = 16

func (a *Aggregator) emit(err error, msg string, kv []any, suppressed int) {
	if suppressed > 0 {
		kv = append(kv[:len(kv):len(kv)], "suppressed", suppressed, "interval", a.interval)
	}
	a.log.Error(err, msg, kv...)
}
