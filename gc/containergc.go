package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
)

// Runtime is the part of the CRI runtime service the container collector
// calls; runtime.RuntimeService satisfies it.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	RemoveContainer(ctx context.Context, containerID string) error
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
}

// CachedLister is the optional capability of a Runtime that answers a
// collection's listing from a cache it keeps current, without calling the
// runtime: the containers and sandboxes of every pod that has a container
// not running or a sandbox not ready, as the runtime lists them (a pod
// whose containers all run in ready sandboxes has nothing to remove, and
// may be left out); false when the cache cannot answer. The agent's
// runtime answers from its PLEG's cache (pleg.StatusCache.NotRunning).
// Every Resync, and for Collect with evictNonDeletedPods, the collector
// lists the runtime itself.
type CachedLister interface {
	CachedListing() (containers []*runtimeapi.Container, sandboxes []*runtimeapi.PodSandbox, ok bool)
}

// Defaults of the collectors, the kubelet's.
const (
	// DefaultContainerPeriod is the kubelet's ContainerGCPeriod.
	DefaultContainerPeriod = time.Minute
	// DefaultRetryPeriod is how soon a collection that could not list the
	// runtime is tried again.
	DefaultRetryPeriod = 5 * time.Second
)

// ContainerOptions configure a ContainerCollector.
type ContainerOptions struct {
	// Policy is the collection policy. Defaults to the kubelet's: no
	// minimum age, one dead instance kept per container, no total limit.
	Policy ContainerPolicy
	// Pods tells which pods' objects may go. Required.
	Pods PodState
	// SourcesReady reports whether every pod source delivered its pods;
	// until then nothing of a deleted pod is removed. Defaults to always
	// ready.
	SourcesReady func() bool
	// PodLogsDir is the root of the pod log directories. Defaults to
	// runtime.DefaultPodLogsDir; "-" leaves logs alone.
	PodLogsDir string
	// Period is the time between two collections. Defaults to 1m.
	Period time.Duration
	// RetryPeriod is how soon a collection that failed to list the
	// runtime runs again. Defaults to 5s.
	RetryPeriod time.Duration
	// Changes, when set, counts the changes of what a collection depends
	// on beyond the time: the runtime's containers and sandboxes, the pods
	// and their workers' states (the agent's counts them); false when it
	// cannot tell. A periodic collection that finds the count where the
	// last collection left it, that one having been complete with nothing
	// to remove, does not list the runtime. Defaults to nil: every
	// collection lists.
	Changes func() (uint64, bool)
	// Resync is how often a collection lists the runtime even though
	// Changes tells that nothing changed: what changes out of the agent's
	// sight (a sandbox left by someone else) is collected within it; the
	// pod log directories are read every collection. Defaults to 10m.
	Resync time.Duration
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Periodic, when set, runs the collections as a task of the Driver,
	// which the agents of one process can share (hollow nodes do): the
	// collector then holds no goroutine between them. Clock still tells
	// the time, but the Driver's real timers start the collections.
	// Defaults to nil: Run's goroutine waits on a timer of Clock's.
	Periodic *periodic.Driver
	// Logger defaults to discarding.
	Logger logr.Logger
}

// DefaultContainerResync is ContainerOptions.Resync's default.
const DefaultContainerResync = 10 * time.Minute

// ContainerCollector removes dead containers, old sandboxes and the logs
// of removed pods, as the kubelet's container garbage collector: every
// Period, often for a while after Trigger (the agent calls it when the
// runtime comes back after an outage, when half-made sandboxes are most
// likely), and from Collect. It is safe for concurrent use.
type ContainerCollector struct {
	rt      Runtime
	opts    ContainerOptions
	log     logr.Logger
	trigger chan struct{}
	// With Periodic: the task, and when the collections after a Trigger
	// stop coming every RetryPeriod; triggered when Trigger came before
	// Start.
	mu         sync.Mutex
	task       *periodic.Task
	burstUntil time.Time
	triggered  bool
	// running serialises collections.
	running chan struct{}
	// clean is what the last collection saw, held while running: ok when
	// it was complete, removed nothing and its Changes count was told.
	clean struct {
		ok    bool
		count uint64
		at    time.Time
	}
	// listed is when a collection last listed the runtime itself.
	listed time.Time
	// skipped counts the collections that did not list the runtime;
	// cached those that read a CachedLister's listing.
	skipped, cached int
}

// NewContainerCollector returns a collector over rt. It does no I/O.
func NewContainerCollector(rt Runtime, opts ContainerOptions) (*ContainerCollector, error) {
	if rt == nil {
		return nil, errors.New("gc: NewContainerCollector needs a Runtime")
	}
	if opts.Pods == nil {
		return nil, errors.New("gc: ContainerOptions.Pods is required")
	}
	if opts.Period < 0 || opts.RetryPeriod < 0 || opts.Resync < 0 || opts.Policy.MinAge < 0 {
		return nil, errors.New("gc: negative period or age")
	}
	if opts.SourcesReady == nil {
		opts.SourcesReady = func() bool { return true }
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = runtime.DefaultPodLogsDir
	}
	if opts.PodLogsDir != "-" && !filepath.IsAbs(opts.PodLogsDir) {
		return nil, fmt.Errorf("gc: PodLogsDir %q is not absolute", opts.PodLogsDir)
	}
	if opts.Period == 0 {
		opts.Period = DefaultContainerPeriod
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultContainerResync
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &ContainerCollector{
		rt:      rt,
		opts:    opts,
		log:     opts.Logger.WithName("containergc"),
		trigger: make(chan struct{}, 1),
		running: make(chan struct{}, 1),
	}
	// A CachedLister's cache holds what the runtime held when the agent
	// started: the first listing of the runtime itself is a Resync later.
	c.listed = opts.Clock.Now()
	return c, nil
}

// Trigger asks Run for a collection now and then every RetryPeriod for
// one Period: the agent calls it when the runtime answers again after an
// outage, and the pods' new sandboxes come within seconds, each making
// the sandbox a crash left half-made collectable. It never blocks.
func (c *ContainerCollector) Trigger() {
	if c.opts.Periodic != nil {
		c.mu.Lock()
		c.burstUntil = c.opts.Clock.Now().Add(c.opts.Period)
		task := c.task
		c.triggered = task == nil
		c.mu.Unlock()
		if task != nil {
			task.Reset(0)
		}
		return
	}
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Run collects every Period (every RetryPeriod when the runtime could not
// be listed, and for one Period after a Trigger) until ctx ends; it
// returns nil then. Errors of a collection are logged, never returned.
func (c *ContainerCollector) Run(ctx context.Context) error { return run.Until(ctx, c) }

// Start is Run without waiting for ctx to end (run.Starter).
func (c *ContainerCollector) Start(ctx context.Context) (wait func(), err error) {
	if d := c.opts.Periodic; d != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		first := c.opts.Period
		if c.triggered {
			first = 0
		}
		c.task = d.Start(ctx, first, func(ctx context.Context) time.Duration {
			c.mu.Lock()
			burstUntil := c.burstUntil
			c.mu.Unlock()
			return c.pass(ctx, burstUntil)
		})
		return c.task.Wait, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.loop(ctx)
	}()
	return func() { <-done }, nil
}

// loop is Run's loop without a Driver.
func (c *ContainerCollector) loop(ctx context.Context) {
	clk := c.opts.Clock
	t := clk.NewTimer(c.opts.Period)
	defer t.Stop()
	var burstUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-c.trigger:
			t.Stop()
			burstUntil = clk.Now().Add(c.opts.Period)
		}
		t.Reset(c.pass(ctx, burstUntil))
	}
}

// pass is one of Run's collections; it returns the time to the next:
// RetryPeriod until burstUntil or after a failed listing, else Period.
func (c *ContainerCollector) pass(ctx context.Context, burstUntil time.Time) time.Duration {
	next := c.opts.Period
	if c.opts.Clock.Now().Before(burstUntil) {
		next = c.opts.RetryPeriod
	}
	// After a Trigger every collection lists: the runtime was away,
	// what it holds may have changed out of every count.
	if _, err := c.collect(ctx, false, next == c.opts.Period); err != nil && ctx.Err() == nil {
		c.log.Error(err, "Container garbage collection failed")
		var le *listError
		if errors.As(err, &le) {
			next = c.opts.RetryPeriod
		}
	}
	return next
}

// listError is a failure to read the runtime: nothing was planned.
type listError struct{ err error }

func (e *listError) Error() string { return e.err.Error() }
func (e *listError) Unwrap() error { return e.err }

// Collect lists the runtime, plans and carries out one collection, and
// returns the plan. With evictNonDeletedPods (the eviction manager's
// reclaim) the dead containers and sandboxes of terminated pods go too.
// A failed removal is reported in the error and the rest goes on.
//
// Without evictNonDeletedPods, it does not list the runtime when
// ContainerOptions.Changes tells that nothing changed since the last
// collection, which was complete and removed nothing, and Resync did not
// pass since the last listing: the plan would be empty again but for the
// pod log directories, which it reads all the same (as the kubelet, every
// collection) and removes when their pods' content may go. Run skips the
// same way, except for a Period after a Trigger. It
// lists when the policy has a MinAge (a container too young then may be
// old enough now).
func (c *ContainerCollector) Collect(ctx context.Context, evictNonDeletedPods bool) (ContainerPlan, error) {
	return c.collect(ctx, evictNonDeletedPods, !evictNonDeletedPods)
}

// collect is Collect; mayskip allows skipping an unchanged collection.
func (c *ContainerCollector) collect(ctx context.Context, evictNonDeletedPods, mayskip bool) (ContainerPlan, error) {
	select {
	case c.running <- struct{}{}:
	case <-ctx.Done():
		return ContainerPlan{}, ctx.Err()
	}
	defer func() { <-c.running }()

	// The count first: a change while listing moves it past what the
	// listing saw.
	var count uint64
	counted := false
	if c.opts.Changes != nil {
		count, counted = c.opts.Changes()
	}
	// Sources first: pods listed after a source became ready are known.
	ready := c.opts.SourcesReady()
	now := c.opts.Clock.Now()
	if mayskip && counted && ready && c.clean.ok && c.clean.count == count && now.Sub(c.clean.at) < c.opts.Resync {
		c.skipped++
		// The pod log directories are read all the same (one ReadDir), as
		// the kubelet reads them every period: one whose pod is gone, made
		// or left out of the count's sight, goes within a Period, not a
		// Resync. Removing one changes nothing the count covers.
		dirs, err := c.readLogDirs(ready)
		plan := PlanContainers(now, Listing{LogDirs: dirs}, c.opts.Pods, c.opts.Policy, ready, false)
		errs := c.apply(ctx, plan)
		if err != nil {
			errs = append(errs, err)
		}
		return plan, errors.Join(errs...)
	}
	c.clean.ok = false
	var l Listing
	fromCache := false
	if cl, ok := c.rt.(CachedLister); ok && !evictNonDeletedPods && now.Sub(c.listed) < c.opts.Resync {
		l.Containers, l.Sandboxes, fromCache = cl.CachedListing()
	}
	if fromCache {
		c.cached++
	} else {
		var err error
		if l.Containers, err = c.rt.ListContainers(ctx, nil); err != nil {
			return ContainerPlan{}, &listError{fmt.Errorf("gc: listing containers: %w", err)}
		}
		if l.Sandboxes, err = c.rt.ListPodSandbox(ctx, nil); err != nil {
			return ContainerPlan{}, &listError{fmt.Errorf("gc: listing sandboxes: %w", err)}
		}
		c.listed = now
	}
	var errs []error
	dirs, err := c.readLogDirs(ready)
	if err != nil {
		errs = append(errs, err)
	}
	l.LogDirs = dirs
	plan := PlanContainers(now, l, c.opts.Pods, c.opts.Policy, ready, evictNonDeletedPods)
	errs = append(errs, c.apply(ctx, plan)...)
	c.clean.ok = counted && ready && len(errs) == 0 && plan.Empty() && c.opts.Policy.MinAge == 0
	c.clean.count, c.clean.at = count, now
	return plan, errors.Join(errs...)
}

// readLogDirs returns the names of the pod log directories, none when
// logs are left alone or the sources are not ready.
func (c *ContainerCollector) readLogDirs(ready bool) ([]string, error) {
	if c.opts.PodLogsDir == "-" || !ready {
		return nil, nil
	}
	entries, err := os.ReadDir(c.opts.PodLogsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("gc: reading the pod logs directory: %w", err)
	} else {
		err = nil
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs, err
}

// apply carries out a plan.
func (c *ContainerCollector) apply(ctx context.Context, plan ContainerPlan) []error {
	var errs []error
	for _, r := range plan.Containers {
		if ctx.Err() != nil {
			return append(errs, ctx.Err())
		}
		if r.Kill {
			if err := c.rt.StopContainer(ctx, r.ID, 0); err != nil && !runtime.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("gc: stopping container %s (%s of pod %s) in an unknown state: %w", r.ID, r.Name, r.PodUID, err))
				continue
			}
		}
		if err := c.rt.RemoveContainer(ctx, r.ID); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("gc: removing container %s (%s of pod %s): %w", r.ID, r.Name, r.PodUID, err))
			continue
		}
		c.log.V(4).Info("Removed dead container", "containerID", r.ID, "container", r.Name, "podUID", r.PodUID)
	}
	for _, r := range plan.Sandboxes {
		if ctx.Err() != nil {
			return append(errs, ctx.Err())
		}
		// Stopping tears down the sandbox's network (its IP is released)
		// even when a crash left it half-made.
		if err := c.rt.StopPodSandbox(ctx, r.ID); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("gc: stopping sandbox %s of pod %s: %w", r.ID, r.PodUID, err))
			continue
		}
		if err := c.rt.RemovePodSandbox(ctx, r.ID); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("gc: removing sandbox %s of pod %s: %w", r.ID, r.PodUID, err))
			continue
		}
		c.log.V(1).Info("Removed sandbox", "sandboxID", r.ID, "podUID", r.PodUID)
	}
	for _, dir := range plan.LogDirs {
		if err := os.RemoveAll(filepath.Join(c.opts.PodLogsDir, dir)); err != nil {
			errs = append(errs, fmt.Errorf("gc: removing pod log directory %s: %w", dir, err))
			continue
		}
		c.log.V(4).Info("Removed pod log directory", "dir", dir)
	}
	return errs
}
