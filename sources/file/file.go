package file

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/internal/manifest"
)

const (
	// DefaultPeriod is how often the path is listed again, the kubelet's
	// FileCheckFrequency.
	DefaultPeriod = 20 * time.Second
	// MaxFileBytes is the largest manifest file read (10 MiB).
	MaxFileBytes = 10 << 20

	// The watch is re-established after a failure with a back-off from
	// watchRetryMin to watchRetryMax, the kubelet's.
	watchRetryMin = time.Second
	watchRetryMax = 20 * time.Second
	// coalesce is how long events are gathered before one re-list.
	coalesce = 100 * time.Millisecond
	// DefaultReadTimeout bounds the read of one manifest file.
	DefaultReadTimeout = 10 * time.Second
)

// Options configures a Source.
type Options struct {
	// Path is a directory of manifests (read non-recursively) or a single
	// manifest file. Required.
	Path string
	// NodeName is the node's name: it suffixes the pods' names and is part
	// of their UIDs. Defaults to the name of the agent the Source is given
	// to (SetNodeName); set it only to run the Source without an agent.
	NodeName string
	// Period is how often the path is listed again, whatever the watch
	// reported. Defaults to 20s (the kubelet's FileCheckFrequency).
	Period time.Duration
	// ReadTimeout bounds the read of one manifest file: a read that takes
	// longer (a file system that hangs) is given up with an error naming
	// the file, and the other files are read. Defaults to 10s.
	ReadTimeout time.Duration
	// Logger receives the source's logs: every manifest, and every
	// document of one, that gives no pod, with the reason. Defaults to the
	// agent's logger when the Source is given to an agent
	// (sources.LoggerSetter), else to discarding them (a logr.Discard()
	// Logger counts as none).
	Logger logr.Logger
}

func (o *Options) setDefaults() error {
	if o.Path == "" {
		return errors.New("file: Path is required")
	}
	o.Path = filepath.Clean(o.Path)
	switch {
	case o.Period == 0:
		o.Period = DefaultPeriod
	case o.Period < 0:
		return fmt.Errorf("file: negative Period %v", o.Period)
	}
	switch {
	case o.ReadTimeout == 0:
		o.ReadTimeout = DefaultReadTimeout
	case o.ReadTimeout < 0:
		return fmt.Errorf("file: negative ReadTimeout %v", o.ReadTimeout)
	}
	o.Logger = o.Logger.WithName("file")
	return nil
}

// Source is the static pod source that reads manifests from a directory or
// a file, the kubelet's file source. It is a sources.Source; build it with
// New. Run may be called once at a time.
type Source struct {
	opts Options
	log  logr.Logger
	// ownLogger: Options.Logger was given, and SetLogger keeps it.
	ownLogger bool
}

var (
	_ sources.Source       = (*Source)(nil)
	_ sources.NodeNamer    = (*Source)(nil)
	_ sources.LoggerSetter = (*Source)(nil)
)

// New returns a Source for opts. It does no I/O.
func New(opts Options) (*Source, error) {
	own := opts.Logger.GetSink() != nil
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Source{opts: opts, log: opts.Logger.WithValues("path", opts.Path), ownLogger: own}, nil
}

// SetLogger implements sources.LoggerSetter: the agent's logger, unless
// Options.Logger was given.
func (s *Source) SetLogger(log logr.Logger) {
	if s.ownLogger {
		return
	}
	s.opts.Logger = log.WithName("file")
	s.log = s.opts.Logger.WithValues("path", s.opts.Path)
}

// SetNodeName implements sources.NodeNamer: the agent's name, unless
// Options.NodeName names another node.
func (s *Source) SetNodeName(name string) error {
	if s.opts.NodeName != "" && s.opts.NodeName != name {
		return fmt.Errorf("file: Options.NodeName %q is not the agent's node name %q (leave it empty)", s.opts.NodeName, name)
	}
	s.opts.NodeName = name
	return nil
}

// Run lists the path, sends its pods as a snapshot, and lists it again on
// every change the watch reports and every Period, sending a snapshot only
// when the pods differ from the last one sent (the first is always sent,
// even empty, so that the source becomes ready). It blocks until ctx ends,
// returns nil then, and returns after its goroutines have exited.
func (s *Source) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	if s.opts.NodeName == "" {
		return errors.New("file: no node name: give the Source to an agent, or set Options.NodeName")
	}
	l := newLister(s.opts.Path, s.opts.NodeName, s.log)
	l.timeout = s.opts.ReadTimeout
	trigger := make(chan struct{}, 1)

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.watch(ctx, trigger) })

	ticker := time.NewTicker(s.opts.Period)
	defer ticker.Stop()
	timer := time.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	pending := false

	var last []*v1.Pod
	sent := false
	relist := func() bool {
		pods, ok := l.list(ctx)
		if ctx.Err() != nil {
			return false
		}
		if !ok || (sent && equality.Semantic.DeepEqual(last, pods)) {
			return true
		}
		s.log.V(4).Info("sending snapshot", "pods", len(pods))
		select {
		case snapshots <- pods:
			last, sent = pods, true
			return true
		case <-ctx.Done():
			return false
		}
	}

	if !relist() {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-trigger:
			if !pending {
				pending = true
				timer.Reset(coalesce)
			}
			continue
		case <-timer.C:
			pending = false
		}
		if !relist() {
			return nil
		}
	}
}

// errRewatch asks watch to set the watch up again at once: the watched
// path appeared or went away.
var errRewatch = errors.New("file: watched path changed")

// watch keeps an fsnotify watch on the path and signals trigger on every
// relevant event, until ctx ends. A failed watch is logged and set up again
// with a back-off.
func (s *Source) watch(ctx context.Context, trigger chan<- struct{}) {
	backoff := watchRetryMin
	lastErr := ""
	for {
		start := time.Now()
		err := s.watchOnce(ctx, trigger)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRewatch) {
			continue
		}
		if time.Since(start) >= watchRetryMax {
			backoff = watchRetryMin
		}
		if err.Error() != lastErr {
			s.log.Error(err, "watch failed, retrying", "retryIn", backoff)
			lastErr = err.Error()
		} else {
			s.log.V(4).Info("watch failed again, retrying", "reason", err.Error(), "retryIn", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, watchRetryMax)
	}
}

// watchOnce sets up one watch and forwards its events until it fails or
// ctx ends. A directory is watched itself; a file, or a path that does not
// exist yet, through its parent directory, filtered to the path.
func (s *Source) watchOnce(ctx context.Context, trigger chan<- struct{}) error {
	path := s.opts.Path
	target, only := path, ""
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		target, only = filepath.Dir(path), path
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file: cannot create watcher: %w", err)
	}
	defer w.Close()
	if err := w.Add(target); err != nil {
		return fmt.Errorf("file: cannot watch %s: %w", target, err)
	}
	s.log.V(4).Info("watching", "target", target)
	// Catch what changed between the last list and the watch.
	notify(trigger)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file: watcher closed")
			}
			switch {
			case ev.Name == target:
				// The watched directory itself went away or moved.
				notify(trigger)
				if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
					return errRewatch
				}
			case only != "":
				if ev.Name != only {
					continue
				}
				notify(trigger)
				if ev.Has(fsnotify.Create) {
					// It may be a directory now: watch it instead.
					return errRewatch
				}
			case strings.HasPrefix(filepath.Base(ev.Name), "."):
				// Dotfiles are not manifests.
			default:
				notify(trigger)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file: watcher closed")
			}
			return fmt.Errorf("file: watching %s: %w", target, err)
		}
	}
}

func notify(trigger chan<- struct{}) {
	select {
	case trigger <- struct{}{}:
	default:
	}
}

// lister reads the path into pods and remembers, per file, the content it
// last read and the last good pod it gave. It is used by Run's goroutine
// alone.
type lister struct {
	path, nodeName string
	log            logr.Logger
	files          map[string]*fileState
	// lastErr is the last error about the path itself, logged once.
	lastErr string
	missing bool
	// dups are the duplicate-name errors of the last list, each logged
	// once, when it first appears.
	dups map[string]bool
	// read reads one manifest file (readManifest; tests replace it), within
	// timeout.
	read    func(name string) ([]byte, error)
	timeout time.Duration
	// stuck holds the files whose read outlived its timeout and has not
	// returned yet, with a channel closed when it does.
	stuck map[string]chan struct{}
}

type fileState struct {
	// sum is the hash of the content last decoded; decoded says it is set.
	sum     [sha256.Size]byte
	decoded bool
	// pod is what that content gave, nil when it was bad.
	pod *v1.Pod
	// good is the last good pod the file gave, kept while it is bad.
	good *v1.Pod
	// readErr is the last read error, logged once.
	readErr string
}

func newLister(path, nodeName string, log logr.Logger) *lister {
	return &lister{
		path: path, nodeName: nodeName, log: log, files: map[string]*fileState{},
		read: readManifest, timeout: DefaultReadTimeout, stuck: map[string]chan struct{}{},
	}
}

// list reads the path and returns its pods, in file name order. ok is false
// when the path could not be read at all: the previous snapshot stands.
func (l *lister) list(ctx context.Context) (pods []*v1.Pod, ok bool) {
	pods = []*v1.Pod{}
	var from []string // the file of each pod
	fi, err := os.Stat(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !l.missing {
			l.log.Info("manifest path does not exist, no static pods")
			l.missing = true
		}
		l.lastErr = ""
		clear(l.files)
		return pods, true
	case err != nil:
		l.pathError(err)
		return nil, false
	}
	l.missing = false

	seen := map[string]bool{}
	switch {
	case fi.IsDir():
		entries, err := os.ReadDir(l.path)
		if err != nil {
			l.pathError(err)
			return nil, false
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			name := filepath.Join(l.path, e.Name())
			// Stat follows symlinks: a link to a manifest is a manifest.
			info, err := os.Stat(name)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// Gone since ReadDir, or a dangling link.
				l.log.V(4).Info("skipping vanished manifest", "file", name)
				continue
			case err != nil:
				seen[name] = true
				if pod := l.readFailed(name, err); pod != nil {
					pods, from = append(pods, pod), append(from, name)
				}
				continue
			case info.IsDir():
				l.log.V(4).Info("not recursing into subdirectory", "file", name)
				continue
			case !info.Mode().IsRegular():
				// A FIFO, a device, a socket: reading it could block or
				// never end.
				seen[name] = true
				if pod := l.readFailed(name, notRegular(name, info.Mode())); pod != nil {
					pods, from = append(pods, pod), append(from, name)
				}
				continue
			}
			seen[name] = true
			if pod := l.readFile(ctx, name); pod != nil {
				pods, from = append(pods, pod), append(from, name)
			}
		}
	case fi.Mode().IsRegular():
		seen[l.path] = true
		if pod := l.readFile(ctx, l.path); pod != nil {
			pods, from = append(pods, pod), append(from, l.path)
		}
	default:
		l.pathError(fmt.Errorf("file: %s is neither a directory nor a regular file", l.path))
		return nil, false
	}
	l.lastErr = ""
	for name := range l.files {
		if !seen[name] {
			delete(l.files, name)
		}
	}
	return l.dedupe(pods, from), true
}

func (l *lister) pathError(err error) {
	if err.Error() != l.lastErr {
		l.log.Error(err, "cannot read manifest path, keeping the previous pods")
		l.lastErr = err.Error()
	}
}

// readFile returns the pod the file gives: the one its content decodes to,
// or when that fails, the last good one (nil if none).
func (l *lister) readFile(ctx context.Context, name string) *v1.Pod {
	data, err := l.readWithin(ctx, name)
	if err != nil && ctx.Err() != nil {
		return nil // Shutting down: the snapshot is not sent.
	}
	if err != nil {
		return l.readFailed(name, err)
	}
	st := l.state(name)
	st.readErr = ""
	sum := sha256.Sum256(data)
	if st.decoded && sum == st.sum {
		if st.pod != nil {
			return st.pod
		}
		return st.good
	}
	st.sum, st.decoded = sum, true
	pod, ignored, err := decode(data, name, l.nodeName)
	for _, e := range ignored {
		l.log.Error(e, "manifest document ignored", "file", name)
	}
	if err != nil {
		st.pod = nil
		if st.good != nil {
			l.log.Error(err, "bad manifest, keeping its last good pod", "file", name, "pod", st.good.Name)
		} else {
			l.log.Error(err, "bad manifest", "file", name)
		}
		return st.good
	}
	l.log.V(4).Info("read manifest", "file", name, "pod", pod.Name, "podUID", pod.UID)
	st.pod, st.good = pod, pod
	return pod
}

func (l *lister) readFailed(name string, err error) *v1.Pod {
	st := l.state(name)
	st.decoded = false
	if err.Error() != st.readErr {
		l.log.Error(err, "cannot read manifest", "file", name)
		st.readErr = err.Error()
	}
	return st.good
}

func (l *lister) state(name string) *fileState {
	st := l.files[name]
	if st == nil {
		st = &fileState{}
		l.files[name] = st
	}
	return st
}

// dedupe drops the pods whose namespace/name an earlier file (in name
// order) already gave, as the merge would, but logs an error naming both
// files, once for as long as the duplicate lasts.
func (l *lister) dedupe(pods []*v1.Pod, from []string) []*v1.Pod {
	first := make(map[string]string, len(pods))
	out := pods[:0]
	dups := map[string]bool{}
	for i, pod := range pods {
		full := pod.Namespace + "/" + pod.Name
		if f, ok := first[full]; ok {
			msg := fmt.Sprintf("file: %s and %s both define the pod %s: ignoring the one in %s", f, from[i], full, from[i])
			dups[msg] = true
			if !l.dups[msg] {
				l.log.Error(errors.New(msg), "duplicate static pod name", "pod", full, "file", from[i], "keptFile", f)
			}
			continue
		}
		first[full] = from[i]
		out = append(out, pod)
	}
	l.dups = dups
	return out
}

// readWithin reads the file with l.read in a goroutine of its own and
// waits at most l.timeout for it, or until ctx ends. A read that outlives
// its timeout is left to finish on its own (a read blocked in the kernel
// cannot be interrupted); the file is not read again until it has.
func (l *lister) readWithin(ctx context.Context, name string) ([]byte, error) {
	if done, ok := l.stuck[name]; ok {
		select {
		case <-done:
			delete(l.stuck, name)
		default:
			return nil, fmt.Errorf("file: %s: an earlier read is still blocked", name)
		}
	}
	type result struct {
		data []byte
		err  error
	}
	res := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := l.read(name)
		res <- result{data, err}
	}()
	timer := time.NewTimer(l.timeout)
	defer timer.Stop()
	select {
	case r := <-res:
		return r.data, r.err
	case <-timer.C:
		l.stuck[name] = done
		return nil, fmt.Errorf("file: %s: read did not finish within %v", name, l.timeout)
	case <-ctx.Done():
		l.stuck[name] = done
		return nil, ctx.Err()
	}
}

// notRegular is the error for a manifest that is not a regular file.
func notRegular(name string, mode fs.FileMode) error {
	var what string
	switch mode.Type() {
	case fs.ModeNamedPipe:
		what = "a named pipe"
	case fs.ModeSocket:
		what = "a socket"
	case fs.ModeDevice | fs.ModeCharDevice:
		what = "a character device"
	case fs.ModeDevice:
		what = "a block device"
	default:
		return fmt.Errorf("file: %s is not a regular file (mode %v): skipped", name, mode)
	}
	return fmt.Errorf("file: %s is %s, not a regular file: skipped", name, what)
}

// decode turns the content of manifest file name into its pod: one Pod,
// its first YAML document, defaulted with sources.StaticPodDefaults and
// valid. ignored are the errors of the documents after the first, which
// the kubelet ignores without a word: one for each, for the caller to
// report.
func decode(data []byte, name, nodeName string) (pod *v1.Pod, ignored []error, err error) {
	pods, kind, extra, err := manifest.DecodeFirst(data)
	for i := range extra {
		ignored = append(ignored, fmt.Errorf("file: %s: document %d of %d ignored: a manifest file gives one pod, from its first document, as the kubelet reads it (put each pod in a file of its own)",
			name, i+2, extra+1))
	}
	switch {
	case err == nil && kind != manifest.KindPod:
		return nil, ignored, fmt.Errorf("file: %s: file holds a %s, not a Pod: a manifest file gives one pod", name, kind)
	case err != nil:
		return nil, ignored, fmt.Errorf("file: %s: %w", name, err)
	}
	pod = pods[0]
	sources.StaticPodDefaults(pod, name, nodeName)
	if err := sources.ValidateStatic(pod); err != nil {
		return nil, ignored, fmt.Errorf("file: %s: %w", name, err)
	}
	return pod, ignored, nil
}
