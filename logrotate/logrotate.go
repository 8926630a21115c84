// Package logrotate rotates the containers' logs as the kubelet's
// container log manager does: every 10 s, the log of each running
// container that outgrew MaxSize (10Mi) is renamed with a timestamp
// suffix and the runtime is asked to reopen it (CRI ReopenContainerLog);
// older rotated files are gzip-compressed, and at most MaxFiles (5) files
// per container are kept, the oldest removed first.
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
// None in the rules: a log that outgrew MaxSize is rotated at the first
// pass after it did, as the kubelet's. What a pass costs differs, on
// purpose, so that an idle node's rotator costs nothing per container:
//
//   - The kubelet reads every running container's status and stats its
//     log in every pass, 10,000 stat calls every 10 s at 10,000 pods
//     (about 7 µs each on a small VM: 0.7 % of a core, the floor of any
//     pass that checks every log). While Run runs, a Rotator watches each
//     log with a one-shot inotify watch, armed before the log's size is
//     read, and a pass reads the sizes of the logs written since their
//     last check only: a quiet pass reads the kernel's queue of events
//     and nothing else, and a log written without pause costs a stat and
//     re-arming its watch per pass. A log not there yet (the runtime
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
//   - There is one worker, the kubelet's default (containerLogMaxWorkers
//     1).
//
// # Concurrency
//
// A Rotator is safe for concurrent use; rotations never overlap. Run
// starts no goroutine: a pass reads the watches' events the kernel queued
// since the last. Run returns after its loop ended and its inotify
// instance is closed.
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
	"slices"
	"strings"
	"sync"
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
		logs: map[string]*logState{}, due: map[string]struct{}{}, byWatch: map[int32][]string{}, notifying: map[uint64]bool{},
	}, nil
}

// Run rotates every Period until ctx ends, and returns nil then. While it
// runs, the logs are watched (inotify) so that a pass checks only the
// logs written since the last one.
func (r *Rotator) Run(ctx context.Context) error {
	if r.max < 0 {
		<-ctx.Done()
		return nil
	}
	if err := r.startWatching(); err != nil {
		r.log.Info("Container log writes cannot be watched: every log is checked every pass", "reason", err.Error())
	}
	defer r.stopWatching()
	t := r.opts.Clock.NewTicker(r.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if err := r.RotateAll(ctx); err != nil && ctx.Err() == nil {
			r.log.Error(err, "Rotating container logs failed")
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
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Clock.Now()
	full := r.w == nil || r.lastFull.IsZero() || now.Sub(r.lastFull) >= r.opts.Resync
	if r.w != nil {
		overflow, err := r.w.read(r.written)
		if err != nil || overflow {
			if err != nil {
				r.log.Error(err, "Reading log writes failed, checking every log")
			}
			full = true
		}
	}
	if err := r.list(ctx, full); err != nil {
		return err
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
		// The watch is armed before the size is read: a write after the
		// read is told.
		if r.w != nil && !st.poll && st.watch == 0 && !exhausted {
			if err := r.arm(id, st); errors.Is(err, errWatchesExhausted) {
				// Checked every pass until a watch is free again.
				exhausted = true
			}
		}
		r.checked++
		fi, rotated, err := r.rotate(ctx, id, st.path)
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
		if st.watch == 0 {
			r.due[id] = struct{}{}
		} else {
			delete(r.due, id)
		}
	}
	return errors.Join(errs...)
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
// rotate the log. Names sort oldest first (their timestamp suffix).
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
	slices.Sort(rotated)
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
func (r *Rotator) rotate(ctx context.Context, id, path string) (os.FileInfo, bool, error) {
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
	for _, f := range st.Remove {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fi, false, fmt.Errorf("logrotate: container %s: removing old log: %w", id, err)
		}
	}
	for _, f := range st.Compress {
		if err := compress(f); err != nil {
			return fi, false, fmt.Errorf("logrotate: container %s: %w", id, err)
		}
	}
	if !st.Rotate {
		return fi, false, nil
	}
	rotated := path + "." + r.opts.Clock.Now().Format(TimestampFormat)
	if err := os.Rename(path, rotated); err != nil {
		return fi, false, fmt.Errorf("logrotate: container %s: rotating %s: %w", id, path, err)
	}
	if err := r.reopen.ReopenContainerLog(ctx, id); err != nil {
		// Put the log back: the runtime still writes to it.
		if rerr := os.Rename(rotated, path); rerr != nil {
			return fi, true, fmt.Errorf("logrotate: container %s: reopening the log: %w; renaming it back: %w", id, err, rerr)
		}
		return fi, false, fmt.Errorf("logrotate: container %s: reopening the log: %w", id, err)
	}
	r.log.V(2).Info("Rotated container log", "containerID", id, "path", path, "rotated", rotated)
	return fi, true, nil
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

// compress gzips f into f.gz (through f.gz.tmp) and removes f.
func compress(f string) (err error) {
	in, err := os.Open(f)
	if err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	defer in.Close()
	tmp := f + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	w := gzip.NewWriter(out)
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	if err := os.Rename(tmp, f+compressSuffix); err != nil {
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	return os.Remove(f)
}
