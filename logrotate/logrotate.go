// Package logrotate rotates the containers' logs as the kubelet's
// container log manager does: every 10 s, the log of each running
// container that outgrew MaxSize (10Mi) is renamed with a timestamp
// suffix and the runtime is asked to reopen it (CRI ReopenContainerLog);
// older rotated files are gzip-compressed, and at most MaxFiles (5) files
// per container are kept, the oldest removed first.
//
// Plan decides, without I/O, what one rotation does to a log's
// directory; Rotator lists the running containers, reads their log paths
// and carries the plans out.
//
// The runtime must be able to reopen a container's log: Rotator finds
// ReopenContainerLog on the runtime, or through the generated client of
// runtime/cri's Client (RuntimeClient). Without either it reports an
// error at construction.
//
// # Differences from the kubelet
//
// None in the rules. There is one worker, the kubelet's default
// (containerLogMaxWorkers 1). The kubelet reads every running container's
// status in every pass for its log path; a Rotator reads it once per
// container, and not at all for the containers whose paths the runtime's
// LogPathLister tells (the agent's, from the PLEG's cache), so that the
// first pass after thousands of containers started costs a stat per log
// rather than a CRI call per container.
//
// # Concurrency
//
// A Rotator is safe for concurrent use; rotations never overlap. Run
// returns after its loop ended.
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
	// paths holds the log path of each running container seen by the
	// last pass: a container's log path never changes, so a pass asks the
	// runtime for the status of new containers only.
	paths map[string]string
}

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
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Rotator{rt: rt, reopen: ro, opts: opts, max: opts.MaxSize.Value(), log: opts.Logger.WithName("logrotate")}, nil
}

// Run rotates every Period until ctx ends, and returns nil then.
func (r *Rotator) Run(ctx context.Context) error {
	if r.max < 0 {
		<-ctx.Done()
		return nil
	}
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

// RotateAll rotates the logs of the running containers that need it. It
// lists the running containers and reads the status (for the log path) of
// those the previous pass did not see and the runtime's LogPathLister, if
// it has one, does not list, so that a pass over unchanged containers
// costs one list and a stat per log.
func (r *Rotator) RotateAll(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return fmt.Errorf("logrotate: listing containers: %w", err)
	}
	var errs []error
	paths := make(map[string]string, len(cs))
	var listed map[string]string // the LogPathLister's, asked once
	asked := false
	for _, c := range cs {
		if ctx.Err() != nil {
			break
		}
		id := c.GetId()
		path, known := r.paths[id]
		if !known && !asked {
			asked = true
			if l, ok := r.rt.(LogPathLister); ok {
				listed, _ = l.RunningLogPaths()
			}
		}
		if !known {
			path, known = listed[id]
		}
		if !known {
			st, err := r.rt.ContainerStatus(ctx, id, false)
			if err != nil {
				errs = append(errs, fmt.Errorf("logrotate: status of container %s: %w", id, err))
				continue
			}
			path = st.GetStatus().GetLogPath()
		}
		paths[id] = path
		if path == "" {
			continue
		}
		if err := r.rotate(ctx, id, path); err != nil {
			errs = append(errs, err)
		}
	}
	r.paths = paths
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

func (r *Rotator) rotate(ctx context.Context, id, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("logrotate: container %s: %w", id, err)
	}
	if fi.Size() <= r.max {
		return nil
	}
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return fmt.Errorf("logrotate: container %s: %w", id, err)
	}
	st := Plan(path, fi.Size(), r.max, r.opts.MaxFiles, matches)
	for _, f := range st.Remove {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logrotate: container %s: removing old log: %w", id, err)
		}
	}
	for _, f := range st.Compress {
		if err := compress(f); err != nil {
			return fmt.Errorf("logrotate: container %s: %w", id, err)
		}
	}
	if !st.Rotate {
		return nil
	}
	rotated := path + "." + r.opts.Clock.Now().Format(TimestampFormat)
	if err := os.Rename(path, rotated); err != nil {
		return fmt.Errorf("logrotate: container %s: rotating %s: %w", id, path, err)
	}
	if err := r.reopen.ReopenContainerLog(ctx, id); err != nil {
		// Put the log back: the runtime still writes to it.
		if rerr := os.Rename(rotated, path); rerr != nil {
			return fmt.Errorf("logrotate: container %s: reopening the log: %w; renaming it back: %w", id, err, rerr)
		}
		return fmt.Errorf("logrotate: container %s: reopening the log: %w", id, err)
	}
	r.log.V(2).Info("Rotated container log", "containerID", id, "path", path, "rotated", rotated)
	return nil
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
