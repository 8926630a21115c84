// Package logrotate rotates the containers' logs as the kubelet's
// container log manager does: the log of a running container that
// outgrew MaxSize (10Mi) is renamed with a timestamp suffix and the
// runtime is asked to reopen it (CRI ReopenContainerLog); older rotated
// files are gzip-compressed, and at most MaxFiles (5) files per container
// are kept, the oldest removed first.
//
// Plan decides, without I/O, what one rotation does to a log's
// directory; Rotator lists the running containers, reads their log paths,
// watches their logs and carries the plans out.
//
// The runtime must be able to reopen a container's log: Rotator finds
// ReopenContainerLog on the runtime, or through the generated client of
// runtime/cri's Client (RuntimeClient). Without either it reports an
// error at construction.
//
// # Differences from the kubelet
//
// The kubelet checks every log every 10 s (containerLogMonitorInterval)
// and compresses in the same worker: a container writing as fast as it
// can fills hundreds of MiB between two checks, and its rotated files
// wait uncompressed for that worker. Here a container's logs stay close
// to MaxSize × MaxFiles under a writer at full speed:
//
//   - While Run runs, a log written to is checked as soon as it is
//     written (a one-shot inotify watch wakes Run), at most as often as
//     its growth needs for it to be rotated close to MaxSize: not before
//     a quarter of the time its rate of growth takes to reach MaxSize,
//     within [1ms, Period]. A log written without pause is checked every
//     few milliseconds near MaxSize; one written slowly, once a Period,
//     as before.
//   - Rotated files are compressed by a goroutine of Run's, off the
//     rotations' path, at gzip's fastest level (the kubelet uses the
//     default level; the format is the same). When a rotated file is still waiting for it as a
//     newer one comes, compression fell behind: the waiting file is
//     dropped rather than left uncompressed.
//   - A rotation also removes the oldest rotated files while they pass,
//     with the log, MaxSize × MaxFiles bytes (the bound the kubelet's
//     count implies; a log rotated past MaxSize would exceed it).
//   - Until the runtime reopened a rotated log, it writes to the rotated
//     file (containerd took up to 0.8s to reopen on a loaded machine, and
//     over 2s in a CI run: a hundred MiB and more from a writer at full
//     speed), and the new log it made is not checked. While Run runs, a
//     guard checks both every 2ms meanwhile, and once more when the
//     reopen returns, never waiting for a pass (the rotator's lock):
//     past twice MaxSize together (less when the older rotated files
//     leave less of MaxSize × MaxFiles), it cuts the
//     rotated file back to its last whole entry within what the log held
//     when it was rotated (at most MaxSize), then the new log to its last
//     whole entry within what is left, dropping what the runtime wrote
//     past those points. The kubelet keeps all of it; here the byte
//     bound wins over those bytes. A process that gets no CPU for a while
//     cannot cut meanwhile: the writer, in processes of its own, may
//     write past the bound until the guard runs again.
//   - Falling behind (a rotated file dropped uncompressed, a log rotated
//     past twice MaxSize, bytes cut by a guard) is logged, at most once a
//     minute, with the counts since the last warning.
//   - Rotations within one second (the timestamp's resolution) are named
//     log.<timestamp>.<n>, n counting from 1, and ordered by n.
//   - Run passes over every log when it starts, as the kubelet does;
//     with a runtime's ChangeCounter it looks for new containers every
//     100ms (reading the count, listing only when it moved), otherwise
//     every Period. Until a new container is found (the agent's count
//     moves when its PLEG sees the container: within a relist, 1s), its
//     log grows unchecked: that first file is rotated when found, and
//     removed at the next rotation by the byte bound above.
//
// What a pass costs differs, on purpose, so that an idle node's rotator
// costs nothing per container:
//
//   - The kubelet reads every running container's status and stats its
//     log in every pass, 10,000 stat calls every 10 s at 10,000 pods
//     (about 7 µs each on a small VM: 0.7 % of a core, the floor of any
//     pass that checks every log). While Run runs, a Rotator watches each
//     log with a one-shot inotify watch, armed before the log's size is
//     read, and a pass reads the sizes of the logs written since their
//     last check only: a quiet node's rotator sleeps until a log is
//     written. A log not there yet (the runtime
//     makes it when the container starts) has its directory watched, or
//     the pod's log directory, until it is created. Logs on a file system that does not
//     tell of every write (network, FUSE: anything but ext4, xfs, btrfs,
//     tmpfs, overlayfs, f2fs, ramfs and zfs) are checked every pass, as
//     are all logs when the kernel's queue overflowed, when no inotify
//     instance or watch is left (fs.inotify.max_user_instances,
//     max_user_watches), and every Resync (5m) in case.
//   - It reads a container's status once, and not at all for the
//     containers whose paths the runtime's LogPathLister tells (the
//     agent's, from the PLEG's cache), so that the first pass after
//     thousands of containers started costs a stat per log rather than a
//     CRI call per container; with a ChangeCounter (the agent's), it lists
//     the running containers only when they changed.
//
// # Concurrency
//
// A Rotator is safe for concurrent use; rotations of one log never
// overlap. Run starts the compressor, a waiter on the watches (blocked in
// Go's poller, no thread) and, for each rotation, a goroutine that asks
// the runtime to reopen the log and one that guards the rotated file
// meanwhile, so that a runtime slow to reopen one log
// (containerd took up to 0.8s on a loaded machine) delays no other log's
// rotation; it returns after they all exited and its inotify instance is
// closed. RotateAll without Run reopens and compresses in the pass, as
// the kubelet does.
//
// # Errors
//
// A container whose log cannot be rotated is reported and the others go
// on; when the runtime cannot reopen a log, the rename is undone, as the
// kubelet does.
package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	sysruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Defaults, the kubelet's.
const (
	DefaultMaxSize  = 10 << 20 // containerLogMaxSize 10Mi
	DefaultMaxFiles = 5        // containerLogMaxFiles
	DefaultPeriod   = 10 * time.Second
	// DefaultResync is how often every log is checked, written to or
	// not.
	DefaultResync = 5 * time.Minute
	// TimestampFormat is the suffix of a rotated log.
	TimestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	tmpSuffix       = ".tmp"
)

// Runtime is what the rotator calls: the running containers and their
// log paths.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// LogPathLister is an optional capability of a Runtime: the log paths of
// the running containers it knows without reading each container's status
// (an agent knows where its runtime manager puts the logs of the
// containers it created), by container ID, and whether it could tell them.
// It lists only paths it is sure of: the Rotator takes them as the
// runtime's. A pass that meets containers the previous one did not asks
// it once, and reads the status of those it leaves out: after a burst of
// thousands of new containers, the first pass then reads none.
type LogPathLister interface {
	RunningLogPaths() (map[string]string, bool)
}

// ChangeCounter is an optional capability of a Runtime: a count that
// moves whenever its running containers may have changed, and whether it
// can tell now. A pass that finds the count where the last list left it
// does not list the containers again.
type ChangeCounter interface {
	RunningContainersChanges() (uint64, bool)
}

// reopener is the optional ReopenContainerLog of a runtime (cri-api's
// RuntimeService has it).
type reopener interface {
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// runtimeClienter is runtime/cri's Client giving its generated client.
type runtimeClienter interface {
	RuntimeClient() runtimeapi.RuntimeServiceClient
}

type clientReopener struct {
	rc runtimeapi.RuntimeServiceClient
}

func (c clientReopener) ReopenContainerLog(ctx context.Context, id string) error {
	_, err := c.rc.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}, grpc.WaitForReady(false))
	return err
}

// Options configure a Rotator.
type Options struct {
	// MaxSize is the size at which a log is rotated. Defaults to 10Mi;
	// negative disables rotation.
	MaxSize resource.Quantity
	// MaxFiles is how many files of a container's log are kept, the
	// current one included. Defaults to 5; at least 2.
	MaxFiles int
	// Period is the time between two passes. Defaults to 10s.
	Period time.Duration
	// Resync is how often a pass checks every log, even those not
	// written since their last check. Defaults to 5m.
	Resync time.Duration
	// Clock names rotated files and ticks; defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
}

// Rotator rotates the logs of the running containers.
type Rotator struct {
	rt     Runtime
	reopen reopener
	opts   Options
	max    int64
	log    logr.Logger
	mu     sync.Mutex
	// logs holds the log of each running container seen by the last
	// list: a container's log path never changes, so a pass asks the
	// runtime for the status of new containers only.
	logs map[string]*logState
	// due holds the containers whose log the next pass checks: new ones,
	// those written since their last check, and those not watched.
	due map[string]struct{}
	// w, while Run runs, tells which logs were written (nil: every log is
	// checked every pass); byWatch maps its watches to their containers.
	w       watcher
	byWatch map[int32][]string
	// notifying caches notifyingFS by device.
	notifying map[uint64]bool
	// changes is the runtime's ChangeCounter at the last list, when
	// counted.
	changes  uint64
	counted  bool
	lastFull time.Time
	// checked counts the logs whose size was read.
	checked int

	// compressing: Run's compressor is running; rotations queue the
	// rotated files for it rather than compressing them in the pass.
	compressing bool
	// bg, while Run runs, starts the reopens of rotated logs, each in a
	// goroutine of its own, so that a runtime slow to reopen one log
	// delays the checks of no other; reopenDone tells Run one finished.
	bg         *background
	reopenDone chan struct{}
	// queue holds the rotated files waiting for the compressor, oldest
	// first, at most one per log (when a newer one of the same log comes,
	// the older is dropped); inflight is the one being compressed, abort
	// whether it was removed meanwhile.
	queue    []queued
	inflight string
	abort    atomic.Bool
	kick     chan struct{}
	// behind counts, since the last warning, what rotation could not keep
	// up with: rotated files dropped before they were compressed, and logs
	// found past twice MaxSize.
	behind   behindCounts
	lastWarn time.Time
}

// background is Run's context and the goroutines it waits for.
type background struct {
	ctx context.Context
	wg  *sync.WaitGroup
}

// behindCounts is what a warning that rotation falls behind tells.
type behindCounts struct {
	dropped, oversized int
	// cut counts the bytes cut from rotated files that the runtime
	// wrote to while it reopened the log (guard).
	cut               int64
	containerID, path string
	largest           int64
}

// logState is what the Rotator knows of a container's log.
type logState struct {
	path string
	// watch is the armed watch of the log: set, no write happened since
	// the last check (but for the one being told).
	watch int32
	// dir: the watch is of the log's directory (or its parent), the log
	// not being there when it was armed.
	dir bool
	// poll: the log's file system does not tell of writes, the log is
	// checked every pass.
	poll bool
	// size and at are the log's size at its last check and when; next is
	// the earliest time Run checks it again when it is written.
	size     int64
	at, next time.Time
	// rate is the log's estimated growth, in bytes a second; wait the
	// time between its last two checks.
	rate float64
	wait time.Duration
	// reopening: the log was renamed and the runtime is reopening it; it
	// is checked again once it did.
	reopening bool
}

// watcher tells which files were written since their watch was armed.
type watcher interface {
	// add arms a one-shot watch of the file, or of the directory for the
	// files created or moved into it, and returns it. Watches of the same
	// file are the same watch. An error wraps os.ErrNotExist when the
	// file is not there.
	add(path string, dir bool) (int32, error)
	// remove disarms a watch.
	remove(wd int32)
	// read calls fn with the watch of each event since the last read,
	// without blocking, and reports whether events were lost.
	read(fn func(wd int32)) (overflow bool, err error)
	// wait blocks until events are queued, or ctx ends.
	wait(ctx context.Context) error
	close() error
}

// errWatchesExhausted: the user's inotify watches are all taken
// (fs.inotify.max_user_watches).
var errWatchesExhausted = errors.New("no inotify watch left (fs.inotify.max_user_watches)")

// New returns a Rotator over rt. It does no I/O.
func New(rt Runtime, opts Options) (*Rotator, error) {
	if rt == nil {
		return nil, errors.New("logrotate: New needs a Runtime")
	}
	var ro reopener
	// A runtime scoped to one agent (runtime.WithIdentity) lists that
	// agent's containers; the runtime it wraps reopens their logs.
	for probe := any(rt); ro == nil && probe != nil; {
		switch r := probe.(type) {
		case reopener:
			ro = r
		case runtimeClienter:
			ro = clientReopener{r.RuntimeClient()}
		case interface{ Unwrap() runtime.RuntimeService }:
			probe = r.Unwrap()
		default:
			probe = nil
		}
	}
	if ro == nil {
		return nil, errors.New("logrotate: the runtime cannot reopen container logs (no ReopenContainerLog)")
	}
	if opts.MaxSize.IsZero() {
		opts.MaxSize = *resource.NewQuantity(DefaultMaxSize, resource.BinarySI)
	}
	if opts.MaxFiles == 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.MaxFiles < 2 {
		return nil, fmt.Errorf("logrotate: MaxFiles %d must be at least 2", opts.MaxFiles)
	}
	if opts.Period < 0 {
		return nil, errors.New("logrotate: negative Period")
	}
	if opts.Period == 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Resync < 0 {
		return nil, errors.New("logrotate: negative Resync")
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Rotator{
		rt: rt, reopen: ro, opts: opts, max: opts.MaxSize.Value(), log: opts.Logger.WithName("logrotate"),
		kick: make(chan struct{}, 1), reopenDone: make(chan struct{}, 1), logs: map[string]*logState{}, due: map[string]struct{}{}, byWatch: map[int32][]string{}, notifying: map[uint64]bool{},
	}, nil
}

// Run rotates until ctx ends, and returns nil then, after the goroutines
// it started (the compressor, and the watcher's waiter) have exited.
// Every Period it lists the running containers and checks their logs;
// between passes, while the logs can be watched (inotify), a log written
// to is checked as soon as it is written, at most as often as its rate of
// growth needs for it to be rotated close to MaxSize: a log written at
// full speed is checked every millisecond, a log written slowly about
// once a Period. Rotated files are compressed in a goroutine of their
// own, off the rotations' path.
func (r *Rotator) Run(ctx context.Context) error {
	if r.max < 0 {
		<-ctx.Done()
		return nil
	}
	if err := r.startWatching(); err != nil {
		r.log.Info("Container log writes cannot be watched: every log is checked every pass", "reason", err.Error())
	}
	defer r.stopWatching()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	r.mu.Lock()
	// One compressor: a Run beside another leaves it to the first.
	compressor := !r.compressing
	r.compressing = true
	w := r.w
	if compressor {
		r.bg = &background{ctx: ctx, wg: &wg}
	}
	r.mu.Unlock()
	if compressor {
		defer func() {
			// Before wg.Wait: no reopen starts once the loop ended.
			r.mu.Lock()
			r.bg = nil
			r.mu.Unlock()
		}()
		wg.Go(func() {
			r.compressLoop(ctx)
			r.mu.Lock()
			r.compressing = false
			r.mu.Unlock()
		})
	}
	wake := make(chan struct{})
	if w != nil {
		wg.Go(func() { r.waitLoop(ctx, w, wake) })
	}

	t := r.opts.Clock.NewTicker(r.opts.Period)
	defer t.Stop()
	timer := r.opts.Clock.NewTimer(r.opts.Period)
	defer timer.Stop()
	_, counted := r.rt.(ChangeCounter)
	next, err := r.pass(ctx, true)
	for {
		if err != nil && ctx.Err() == nil {
			r.log.Error(err, "Rotating container logs failed")
		}
		timer.Stop()
		wait := r.opts.Period
		if !next.IsZero() {
			wait = max(next.Sub(r.opts.Clock.Now()), 0)
		}
		if counted {
			wait = min(wait, newContainersCheck)
		}
		if wait < r.opts.Period {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			next, err = r.pass(ctx, true)
		case <-wake:
			next, err = r.pass(ctx, false)
		case <-r.reopenDone:
			next, err = r.pass(ctx, false)
		case <-timer.C():
			next, err = r.pass(ctx, false)
		}
	}
}

// waitLoop tells wake each time the watcher has events queued, until ctx
// ends. A watcher that cannot wait leaves the checks to the passes.
func (r *Rotator) waitLoop(ctx context.Context, w watcher, wake chan<- struct{}) {
	for {
		if err := w.wait(ctx); err != nil {
			if ctx.Err() == nil {
				r.log.Info("Container log writes are checked every pass only", "reason", err.Error())
			}
			return
		}
		select {
		case wake <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
}

// startWatching opens the watcher; the next pass checks every log and
// arms their watches.
func (r *Rotator) startWatching() error {
	w, err := newWatcher()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		// Run runs twice: the first one's watcher serves both.
		w.close()
		return nil
	}
	r.w = w
	r.lastFull = time.Time{}
	return nil
}

// stopWatching closes the watcher, which drops its watches.
func (r *Rotator) stopWatching() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return
	}
	if err := r.w.close(); err != nil {
		r.log.Error(err, "Closing the log watcher failed")
	}
	r.w = nil
	clear(r.byWatch)
	for _, st := range r.logs {
		st.watch = 0
	}
}

// RotateAll rotates the logs of the running containers that need it.
//
// It lists the running containers, unless the runtime's ChangeCounter
// tells that they did not change since the last list, and reads the
// status (for the log path) of those the previous list did not have and
// the runtime's LogPathLister, if it has one, does not list. Then it
// checks the size of each new log, of each log written since its last
// check, and of each log not watched: while Run runs, that is only the
// logs written to; otherwise, and every Resync, every log.
func (r *Rotator) RotateAll(ctx context.Context) error {
	_, err := r.pass(ctx, true)
	return err
}

// newContainersCheck is how often Run reads the runtime's ChangeCounter
// (a count, cheap) for new containers: a container that writes at full
// speed from its start writes to its first rotated file until then.
const newContainersCheck = 100 * time.Millisecond

// Checks of a log written to: after a check, the log is checked again
// when it is written, not before half the time its growth since the last
// check takes to reach MaxSize, within [minCheck, Period]. A log checked
// for the first time in a Period is checked again minCheck later, which
// measures its growth.
const minCheck = time.Millisecond

// pass is one pass: listed (RotateAll's), or of the logs written since
// their last check and due (Run's, between the listed ones). It returns
// the time the next unlisted pass is due, zero when none is.
func (r *Rotator) pass(ctx context.Context, listed bool) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Clock.Now()
	full := listed && (r.w == nil || r.lastFull.IsZero() || now.Sub(r.lastFull) >= r.opts.Resync)
	if r.w != nil {
		overflow, err := r.w.read(r.written)
		if err != nil || overflow {
			if err != nil {
				r.log.Error(err, "Reading log writes failed, checking every log")
			}
			full, listed = true, true
		}
	}
	_, counted := r.rt.(ChangeCounter)
	if listed || counted {
		// Unlisted, a list happens only when the runtime's count of
		// changes moved.
		if err := r.list(ctx, full); err != nil {
			return time.Time{}, err
		}
	}
	if full {
		r.lastFull = now
		for id := range r.logs {
			r.due[id] = struct{}{}
		}
	}
	ids := make([]string, 0, len(r.due))
	for id := range r.due {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var errs []error
	var next time.Time
	exhausted := false
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		st := r.logs[id]
		if st == nil || st.path == "" {
			delete(r.due, id)
			continue
		}
		if st.reopening {
			continue // due once reopened
		}
		if !listed && st.next.After(now) {
			// Written, but not due yet.
			if next.IsZero() || st.next.Before(next) {
				next = st.next
			}
			continue
		}
		// The watch is armed before the size is read: a write after the
		// read is told.
		if r.w != nil && !st.poll && st.watch == 0 && !exhausted {
			if err := r.arm(id, st); errors.Is(err, errWatchesExhausted) {
				// Checked every pass until a watch is free again.
				exhausted = true
			}
		}
		r.checked++
		fi, rotated, err := r.rotate(ctx, id, st)
		switch {
		case fi != nil && !st.poll && !r.notifies(fi, st.path):
			st.poll = true
			r.unwatch(id, st)
		case fi != nil && st.dir, rotated, err != nil:
			// The log appeared after its directory's watch was armed,
			// the watch followed the renamed log, or the log is tried
			// again: the next pass arms the log's watch.
			r.unwatch(id, st)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if fi != nil {
			r.schedule(st, fi.Size(), rotated, now)
			if st.watch == 0 && (next.IsZero() || st.next.Before(next)) {
				next = st.next
			}
		}
		if st.watch == 0 {
			r.due[id] = struct{}{}
		} else {
			delete(r.due, id)
		}
	}
	return next, errors.Join(errs...)
}

// schedule sets when a log of size bytes, checked at now, is checked
// again when written: a quarter of the time it takes to reach MaxSize
// (from 0 when it was rotated) at its rate of growth, the highest of its
// growth since the last check and half the rate before (a writer's bursts
// are not mistaken for its pace), and at most twice the last wait.
func (r *Rotator) schedule(st *logState, size int64, rotated bool, now time.Time) {
	elapsed := now.Sub(st.at)
	grown := size - st.size
	if grown < 0 {
		grown = size // rotated since, by another
	}
	if st.at.IsZero() || elapsed > 2*r.opts.Period {
		// The first check in a while: the next one, soon, measures the
		// log's growth.
		st.rate = 0
		elapsed, grown = 0, 0
	}
	if elapsed > 0 {
		st.rate = max(float64(grown)/elapsed.Seconds(), st.rate/2)
	}
	left := r.max - size
	if rotated {
		left, size = r.max, 0
	}
	wait := minCheck
	switch {
	case st.at.IsZero() || elapsed == 0:
		st.wait = 0
	case st.rate > 0:
		wait = time.Duration(float64(max(left, 0)) / st.rate / 4 * float64(time.Second))
	default:
		wait = r.opts.Period
	}
	if st.wait > 0 {
		// At most twice the last wait: a writer that just started (or
		// sped up) is not taken at the pace of its first bytes.
		wait = min(wait, 2*st.wait)
	}
	wait = min(max(wait, minCheck), r.opts.Period)
	st.size, st.at, st.next, st.wait = size, now, now.Add(wait), wait
}

// arm arms the watch of a container's log or, while the log is not
// there, of its directory or the directory's parent (the pod's log
// directory), which tell when the log is created.
func (r *Rotator) arm(id string, st *logState) error {
	wd, err := r.w.add(st.path, false)
	st.dir = false
	for dir, up := filepath.Dir(st.path), 0; errors.Is(err, os.ErrNotExist) && up < 2; dir, up = filepath.Dir(dir), up+1 {
		wd, err = r.w.add(dir, true)
		st.dir = true
	}
	if err != nil {
		return err
	}
	st.watch = wd
	r.byWatch[wd] = append(r.byWatch[wd], id)
	return nil
}

// unwatch detaches the container's log from its watch, and disarms the
// watch when no other log shares it.
func (r *Rotator) unwatch(id string, st *logState) {
	wd := st.watch
	if wd == 0 {
		return
	}
	st.watch, st.dir = 0, false
	ids := slices.DeleteFunc(r.byWatch[wd], func(s string) bool { return s == id })
	if len(ids) > 0 {
		r.byWatch[wd] = ids
		return
	}
	delete(r.byWatch, wd)
	if r.w != nil {
		r.w.remove(wd)
	}
}

// written marks the containers of watch wd as due: their log was written,
// or created; the watch fired, and is gone.
func (r *Rotator) written(wd int32) {
	for _, id := range r.byWatch[wd] {
		if st := r.logs[id]; st != nil && st.watch == wd {
			st.watch, st.dir = 0, false
			r.due[id] = struct{}{}
		}
	}
	delete(r.byWatch, wd)
}

// notifies reports whether the file system of the log fi tells of its
// writes.
func (r *Rotator) notifies(fi os.FileInfo, path string) bool {
	dev, ok := device(fi)
	if !ok {
		return false
	}
	n, seen := r.notifying[dev]
	if !seen {
		n = notifyingFS(path)
		r.notifying[dev] = n
	}
	return n
}

// list brings r.logs to the running containers: a new container's log
// path is found and its log is due, a gone container is forgotten. It
// does not list when the runtime's ChangeCounter tells nothing changed
// since the last list, unless full.
func (r *Rotator) list(ctx context.Context, full bool) error {
	var count uint64
	counted := false
	if c, ok := r.rt.(ChangeCounter); ok {
		count, counted = c.RunningContainersChanges()
	}
	if !full && counted && r.counted && count == r.changes {
		return nil
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		r.counted = false
		return fmt.Errorf("logrotate: listing containers: %w", err)
	}
	var errs []error
	running := make(map[string]struct{}, len(cs))
	var listed map[string]string // the LogPathLister's, asked once
	asked := false
	for _, c := range cs {
		if ctx.Err() != nil {
			r.counted = false
			return ctx.Err()
		}
		id := c.GetId()
		running[id] = struct{}{}
		if _, known := r.logs[id]; known {
			continue
		}
		if !asked {
			asked = true
			if l, ok := r.rt.(LogPathLister); ok {
				listed, _ = l.RunningLogPaths()
			}
		}
		path, known := listed[id]
		if !known {
			st, err := r.rt.ContainerStatus(ctx, id, false)
			if err != nil {
				errs = append(errs, fmt.Errorf("logrotate: status of container %s: %w", id, err))
				continue
			}
			path = st.GetStatus().GetLogPath()
		}
		r.logs[id] = &logState{path: path}
		r.due[id] = struct{}{}
	}
	for id, st := range r.logs {
		if _, ok := running[id]; ok {
			continue
		}
		r.unwatch(id, st)
		delete(r.logs, id)
		delete(r.due, id)
	}
	// A container whose status could not be read is looked at again at
	// the next pass: the count is not kept.
	r.changes, r.counted = count, counted && len(errs) == 0
	return errors.Join(errs...)
}

// Step is one rotation's plan for a log: files to remove, files to
// compress, then whether to rotate the log itself.
type Step struct {
	Remove   []string
	Compress []string
	Rotate   bool
}

// Plan is what the kubelet's rotateLog does to a log of size bytes, given
// the names of the files beside it (siblings: every name starting with
// the log's name and a dot): nothing while the log is within maxSize;
// otherwise remove leftover temporary files and uncompressed rotated
// files that also exist compressed, then the oldest rotated files beyond
// maxFiles-2, compress the remaining uncompressed rotated files, and
// rotate the log. Names sort oldest first (their timestamp suffix, then
// the count of a rotation within the same second: compareRotated).
func Plan(log string, size, maxSize int64, maxFiles int, siblings []string) Step {
	if size <= maxSize {
		return Step{}
	}
	var st Step
	have := map[string]bool{}
	for _, s := range siblings {
		have[s] = true
	}
	var rotated []string
	for _, s := range siblings {
		if !strings.HasPrefix(s, log+".") {
			continue
		}
		switch {
		case strings.HasSuffix(s, tmpSuffix):
			st.Remove = append(st.Remove, s)
		case !strings.HasSuffix(s, compressSuffix) && have[s+compressSuffix]:
			st.Remove = append(st.Remove, s) // compressed already
		default:
			rotated = append(rotated, s)
		}
	}
	slices.SortFunc(rotated, func(a, b string) int { return compareRotated(log, a, b) })
	keep := max(maxFiles-2, 0)
	if n := len(rotated) - keep; n > 0 {
		st.Remove = append(st.Remove, rotated[:n]...)
		rotated = rotated[n:]
	}
	for _, s := range rotated {
		if !strings.HasSuffix(s, compressSuffix) {
			st.Compress = append(st.Compress, s)
		}
	}
	st.Rotate = true
	return st
}

// rotate rotates the log at path when it outgrew MaxSize. It returns the
// log's FileInfo (nil when it could not be read) and whether the log was
// rotated.
func (r *Rotator) rotate(ctx context.Context, id string, ls *logState) (os.FileInfo, bool, error) {
	path := ls.path
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("logrotate: container %s: %w", id, err)
	}
	if fi.Size() <= r.max {
		return fi, false, nil
	}
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return fi, false, fmt.Errorf("logrotate: container %s: %w", id, err)
	}
	st := Plan(path, fi.Size(), r.max, r.opts.MaxFiles, matches)
	var others int64
	st.Remove, st.Compress, others = r.overBudget(path, fi.Size(), matches, st)
	for _, f := range st.Remove {
		if r.inflight != "" && f == r.inflight+compressSuffix+tmpSuffix {
			continue // the compressor's, which removes it when aborted
		}
		if f == r.inflight {
			r.abort.Store(true)
		}
		r.queue = slices.DeleteFunc(r.queue, func(q queued) bool { return q.file == f })
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fi, false, fmt.Errorf("logrotate: container %s: removing old log: %w", id, err)
		}
	}
	for _, f := range st.Compress {
		if r.compressing {
			r.enqueue(id, path, f)
			continue
		}
		if err := compress(f, nil, nil); err != nil {
			return fi, false, fmt.Errorf("logrotate: container %s: %w", id, err)
		}
	}
	if !st.Rotate {
		return fi, false, nil
	}
	rotated := rotatedName(path, r.opts.Clock.Now().Format(TimestampFormat), matches)
	if err := os.Rename(path, rotated); err != nil {
		return fi, false, fmt.Errorf("logrotate: container %s: rotating %s: %w", id, path, err)
	}
	if fi.Size() > 2*r.max {
		r.fellBehind(id, path, behindOversized, fi.Size())
	}
	if bg := r.bg; bg != nil {
		ls.reopening = true
		// Until the runtime reopened the log it writes to the rotated
		// file: the guard holds that file within what the budget leaves.
		done := make(chan struct{})
		// The two files hold at most twice MaxSize, less when the
		// older rotated files leave less of MaxSize × MaxFiles (but
		// MaxSize); the rotated file keeps at most MaxSize.
		limit := max(min(r.max*int64(r.opts.MaxFiles)-others, 2*r.max), r.max)
		g := &guard{r: r, id: id, log: path, rotated: rotated, keep: min(fi.Size(), r.max), limit: limit}
		var cut int64 // the guard's, read once it ended
		guarded := make(chan struct{})
		bg.wg.Go(func() {
			cut = g.run(bg.ctx, done)
			close(guarded)
		})
		bg.wg.Go(func() {
			err := r.reopen.ReopenContainerLog(bg.ctx, id)
			close(done)
			<-guarded // its last check, without the lock
			r.mu.Lock()
			defer r.mu.Unlock()
			if cut > 0 {
				r.fellBehind(id, path, behindCut, cut)
			}
			ls.reopening = false
			if err := r.reopened(id, path, rotated, err); err != nil {
				r.log.Error(err, "Rotating a container log failed")
				// Tried again in a Period, not at once.
				ls.next = r.opts.Clock.Now().Add(r.opts.Period)
			}
			if r.logs[id] == ls {
				r.due[id] = struct{}{}
			}
			select {
			case r.reopenDone <- struct{}{}:
			default:
			}
		})
		return fi, true, nil
	}
	err = r.reopened(id, path, rotated, r.reopen.ReopenContainerLog(ctx, id))
	return fi, err == nil, err
}

// reopened finishes the rotation of container id's log, renamed to
// rotated, once the runtime reopened it (err nil) or failed to: then the
// log is put back, the runtime still writing to it, as the kubelet does.
func (r *Rotator) reopened(id, path, rotated string, err error) error {
	if err != nil {
		if rerr := os.Rename(rotated, path); rerr != nil {
			return fmt.Errorf("logrotate: container %s: reopening the log: %w; renaming it back: %w", id, err, rerr)
		}
		return fmt.Errorf("logrotate: container %s: reopening the log: %w", id, err)
	}
	r.log.V(2).Info("Rotated container log", "containerID", id, "path", path, "rotated", rotated)
	return nil
}

// overBudget adds to the plan's removals the oldest rotated files that,
// with the log of size bytes about to be rotated, pass MaxSize × MaxFiles:
// the bytes the kubelet's count of files implies, which a log rotated past
// MaxSize (its writer faster than the checks) would otherwise exceed. It
// returns the removals, the files still to compress, and the bytes of the
// rotated files kept.
func (r *Rotator) overBudget(log string, size int64, matches []string, st Step) (remove, compress []string, keptBytes int64) {
	budget := r.max * int64(r.opts.MaxFiles)
	removed := map[string]bool{}
	for _, f := range st.Remove {
		removed[f] = true
	}
	var kept []string
	for _, f := range matches {
		if !removed[f] && !strings.HasSuffix(f, tmpSuffix) && strings.HasPrefix(f, log+".") {
			kept = append(kept, f)
		}
	}
	slices.SortFunc(kept, func(a, b string) int { return compareRotated(log, a, b) })
	total := size
	sizes := make([]int64, len(kept))
	for i, f := range kept {
		if fi, err := os.Stat(f); err == nil {
			sizes[i] = fi.Size()
			total += sizes[i]
		}
	}
	remove = st.Remove
	for i := 0; i < len(kept) && total > budget; i++ {
		remove = append(remove, kept[i])
		removed[kept[i]] = true
		total -= sizes[i]
	}
	for _, f := range st.Compress {
		if !removed[f] {
			compress = append(compress, f)
		}
	}
	return remove, compress, total - size
}

// rotatedName is the name of the log rotated at ts: log.ts, or, when a
// log of the same second is there (matches: the log's siblings),
// log.ts.N with N one more than theirs, so that names keep the order of
// the rotations (compareRotated).
func rotatedName(log, ts string, matches []string) string {
	name := log + "." + ts
	n, taken := 0, false
	for _, m := range matches {
		m = strings.TrimSuffix(m, compressSuffix)
		if m == name {
			taken = true
			continue
		}
		if rest, ok := strings.CutPrefix(m, name+"."); ok {
			if k, err := strconv.Atoi(rest); err == nil {
				taken, n = true, max(n, k)
			}
		}
	}
	if !taken {
		return name
	}
	return name + "." + strconv.Itoa(n+1)
}

// compareRotated orders the rotated files of log oldest first: by their
// timestamp, then by their count within that second (rotatedName),
// compressed or not.
func compareRotated(log, a, b string) int {
	key := func(s string) (string, int) {
		s = strings.TrimSuffix(strings.TrimPrefix(s, log+"."), compressSuffix)
		ts, rest, ok := strings.Cut(s, ".")
		if !ok {
			return ts, 0
		}
		n, err := strconv.Atoi(rest)
		if err != nil {
			return s, 0
		}
		return ts, n
	}
	ta, na := key(a)
	tb, nb := key(b)
	if c := strings.Compare(ta, tb); c != 0 {
		return c
	}
	if c := na - nb; c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// queued is a rotated file waiting for the compressor.
type queued struct{ log, file string }

// enqueue gives the compressor f, a rotated file of container id's log.
// A file of the same log still waiting is dropped: compression falls
// behind, and rotated files must not pile up uncompressed.
func (r *Rotator) enqueue(id, log, f string) {
	if f == r.inflight || slices.ContainsFunc(r.queue, func(q queued) bool { return q.file == f }) {
		return
	}
	r.queue = slices.DeleteFunc(r.queue, func(q queued) bool {
		if q.log != log {
			return false
		}
		if err := os.Remove(q.file); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Error(err, "Removing a rotated log waiting for compression failed", "path", q.file)
		}
		r.fellBehind(id, q.file, behindDropped, 0)
		return true
	})
	r.queue = append(r.queue, queued{log: log, file: f})
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// warnEvery is the least time between two warnings that rotation falls
// behind.
const warnEvery = time.Minute

// What rotation could not keep up with.
const (
	// behindDropped: a rotated file dropped before it was compressed.
	behindDropped = iota
	// behindOversized: a log rotated past twice MaxSize; n is its size.
	behindOversized
	// behindCut: n bytes cut from a rotated file the runtime wrote to
	// while it reopened the log.
	behindCut
)

// fellBehind counts what rotation could not keep up with (kind, n: one
// of the behind constants) and warns, at most every warnEvery, with the
// counts since the last warning.
func (r *Rotator) fellBehind(id, path string, kind int, n int64) {
	b := &r.behind
	switch kind {
	case behindDropped:
		b.dropped++
	case behindOversized:
		b.oversized++
		b.largest = max(b.largest, n)
	case behindCut:
		b.cut += n
	}
	b.containerID, b.path = id, path
	now := r.opts.Clock.Now()
	if !r.lastWarn.IsZero() && now.Sub(r.lastWarn) < warnEvery {
		return
	}
	r.log.Info("Container logs are written faster than they are rotated and compressed: rotated logs were dropped uncompressed, rotated past twice MaxSize, or cut while the runtime reopened the log",
		"droppedUncompressed", b.dropped, "rotatedOversized", b.oversized, "largest", b.largest, "cutBytes", b.cut, "maxSize", r.max,
		"containerID", b.containerID, "path", b.path)
	r.lastWarn = now
	*b = behindCounts{}
}

// compressLoop compresses the queued rotated files, one at a time, until
// ctx ends.
func (r *Rotator) compressLoop(ctx context.Context) {
	for {
		r.mu.Lock()
		f := ""
		if len(r.queue) > 0 {
			f = r.queue[0].file
			r.queue = slices.Delete(r.queue, 0, 1)
			r.inflight = f
			r.abort.Store(false)
		}
		r.mu.Unlock()
		if f == "" {
			select {
			case <-ctx.Done():
				return
			case <-r.kick:
			}
			continue
		}
		err := compress(f, func() bool { return ctx.Err() != nil || r.abort.Load() }, &r.mu)
		r.mu.Lock()
		r.inflight = ""
		r.mu.Unlock()
		if err != nil && !errors.Is(err, errAborted) && !errors.Is(err, os.ErrNotExist) {
			r.log.Error(err, "Compressing a rotated container log failed", "path", f)
		}
	}
}

// globEscape escapes the glob metacharacters of a path.
func globEscape(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// errAborted: a compression stopped because the file was removed, or Run
// ended.
var errAborted = errors.New("compression aborted")

// compress gzips f into f.gz (through f.gz.tmp) and removes f. stop, when
// not nil, is asked between chunks and once more before f.gz takes f's
// place, which happens under mu when not nil: a stopped compression
// removes its temporary file and leaves f as it is.
func compress(f string, stop func() bool, mu sync.Locker) (err error) {
	in, err := os.Open(f)
	if err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	defer in.Close()
	tmp := f + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	// The fastest level: rotated logs compress well at any level, and a
	// compressor that keeps up matters more than a few percent of size.
	w, err := gzip.NewWriterLevel(out, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	buf := make([]byte, 256<<10)
	for {
		if stop != nil {
			if stop() {
				return errAborted
			}
			// Off the rotations' path: each chunk gives way to them.
			sysruntime.Gosched()
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return fmt.Errorf("compressing %s: %w", f, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("compressing %s: %w", f, rerr)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	if stop != nil && stop() {
		return errAborted
	}
	if err := os.Rename(tmp, f+compressSuffix); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	return os.Remove(f)
}
