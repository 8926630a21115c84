package sources

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// DefaultUpdatesCapacity is the buffer of Config.Updates, the kubelet's.
const DefaultUpdatesCapacity = 50

// ConfigOptions configures a Config.
type ConfigOptions struct {
	// Logger receives the merge's logs: dropped pods, failed sources.
	// Defaults to discarding them.
	Logger logr.Logger
	// UpdatesCapacity is the buffer of the Updates channel. Defaults to 50
	// (the kubelet's) when zero or negative.
	UpdatesCapacity int
}

func (o *ConfigOptions) setDefaults() {
	if o.UpdatesCapacity <= 0 {
		o.UpdatesCapacity = DefaultUpdatesCapacity
	}
	o.Logger = o.Logger.WithName("sources")
}

// Config merges the snapshots of several named sources into one stream of
// incremental PodUpdates, the kubelet's PodConfig.
//
// Add the sources, then call Run once and read Updates. The methods are safe
// for concurrent use; Add must come before Run.
//
// The pods in the updates are the merge's own objects, shared with later
// updates and with the merge's state: consumers must treat them as read-only
// and DeepCopy before modifying. A pod that did not change keeps its object
// from one update to the next.
type Config struct {
	log     logr.Logger
	updates chan PodUpdate

	// mu guards the fields below.
	mu      sync.Mutex
	sources []namedSource
	started bool
	seen    map[string]bool

	// mergeMu serializes merging and sending, so that the updates of one
	// snapshot go out together and in order.
	mergeMu sync.Mutex
	store   *store // guarded by mergeMu
	// dropped holds, per source, the rejections of its last snapshot, so
	// that each is logged once while it lasts; guarded by mergeMu.
	dropped map[string]map[string]bool
}

type namedSource struct {
	name string
	src  Source
}

// NewConfig returns a Config with no sources. It starts nothing.
func NewConfig(opts ConfigOptions) *Config {
	opts.setDefaults()
	return &Config{
		log:     opts.Logger,
		updates: make(chan PodUpdate, opts.UpdatesCapacity),
		seen:    map[string]bool{},
		dropped: map[string]map[string]bool{},
		store:   newStore(),
	}
}

// Add registers src under name (the Source of its PodUpdates and the value
// of the config.source annotation, e.g. FileSource). It must be called
// before Run; the name must be non-empty and unique.
func (c *Config) Add(name string, src Source) error {
	if name == "" {
		return errors.New("sources: empty source name")
	}
	if src == nil {
		return fmt.Errorf("sources: nil source %q", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("sources: cannot add source %q: Run already called", name)
	}
	for _, s := range c.sources {
		if s.name == name {
			return fmt.Errorf("sources: duplicate source name %q", name)
		}
	}
	c.sources = append(c.sources, namedSource{name: name, src: src})
	if ro, ok := src.(ReadOnlyPods); ok && ro.PodsReadOnly() {
		c.mergeMu.Lock()
		c.store.readOnly[name] = true
		c.mergeMu.Unlock()
	}
	return nil
}

// Updates returns the stream of merged changes. It is never closed: stop
// reading when the context given to Run ends.
//
// The updates of one snapshot arrive together and in the order REMOVE, ADD,
// UPDATE, DELETE, RECONCILE. The first snapshot of every source yields at
// least one update (an empty ADD when nothing changed), so a consumer can
// track which sources it has heard from, as the kubelet's sync loop does.
func (c *Config) Updates() <-chan PodUpdate {
	return c.updates
}

// SourcesReady reports whether every added source has delivered its first
// snapshot and the updates it implied were sent on Updates (they may still
// sit in the channel's buffer). A source that never delivers one keeps it
// false: the kubelet holds back pod cleanup until then.
func (c *Config) SourcesReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sources {
		if !c.seen[s.name] {
			return false
		}
	}
	return true
}

// SeenSource reports whether the named source has delivered its first
// snapshot (and its updates were sent). It is false for unknown names.
func (c *Config) SeenSource(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[name]
}

// Run runs every source in its own goroutine, each with its own snapshot
// channel, merges the snapshots as they come and sends the resulting
// updates on Updates. Sending blocks while the channel is full: nothing is
// dropped, and a slow consumer slows the sources down. A Pusher source
// pushes its snapshots instead, and needs neither goroutine.
//
// A source whose Run returns an error is logged; the others go on. Run
// blocks until ctx ends, returns nil then, and returns only after every
// source's Run has returned. It may be called once.
func (c *Config) Run(ctx context.Context) error {
	// The last channel source's snapshots are merged on Run's own
	// goroutine, which would only wait otherwise: one goroutine less per
	// agent (most have one source).
	wait, last, err := c.start(ctx, true)
	if err != nil {
		return err
	}
	if last != nil {
		last()
	} else {
		<-ctx.Done()
	}
	wait()
	return nil
}

// Start is Run without waiting for ctx to end (run.Starter): with Pusher
// sources only, the Config holds no goroutine.
func (c *Config) Start(ctx context.Context) (wait func(), err error) {
	wait, _, err = c.start(ctx, false)
	return wait, err
}

// Pusher is a Source that can deliver its snapshots without a goroutine
// of the Config's: Start starts it and returns at once; it then calls push
// with each snapshot, one call at a time, until ctx ends; wait returns
// once it stopped. push merges the snapshot and sends its updates:
// like a send on Run's channel, it blocks while Updates is full, and
// returns early once ctx ended. A Config calls Start rather than Run for
// it. The API server source is one: with a shared watch and a
// periodic.Driver it holds no goroutine either.
type Pusher interface {
	Source
	Start(ctx context.Context, push func(ctx context.Context, pods []*v1.Pod)) (wait func(), err error)
}

// start starts the sources. With inline, it returns as last the merge of
// the last channel source, for the caller's goroutine to run; wait waits
// for everything else it started, once ctx ended.
func (c *Config) start(ctx context.Context, inline bool) (wait, last func(), err error) {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return nil, nil, errors.New("sources: Run called more than once")
	}
	c.started = true
	srcs := c.sources
	c.mu.Unlock()

	var wg sync.WaitGroup
	var pushers []func()
	lastChannel := -1
	for i, s := range srcs {
		if _, ok := s.src.(Pusher); !ok {
			lastChannel = i
		}
	}
	for i, s := range srcs {
		if p, ok := s.src.(Pusher); ok {
			w, err := p.Start(ctx, func(ctx context.Context, pods []*v1.Pod) {
				if ctx.Err() == nil {
					c.apply(ctx, s.name, pods)
				}
			})
			if err != nil {
				c.log.Error(err, "source failed", "source", s.name)
				continue
			}
			pushers = append(pushers, w)
			continue
		}
		ch := make(chan []*v1.Pod)
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			err := s.src.Run(ctx, ch)
			switch {
			case err != nil:
				c.log.Error(err, "source failed", "source", s.name)
			case ctx.Err() == nil:
				c.log.Info("source stopped before the end", "source", s.name)
			}
		})
		if inline && i == lastChannel {
			last = func() { c.receive(ctx, s.name, ch, done) }
			continue
		}
		wg.Go(func() { c.receive(ctx, s.name, ch, done) })
	}
	return func() {
		<-ctx.Done()
		for _, w := range pushers {
			w()
		}
		wg.Wait()
	}, last, nil
}

// receive merges the snapshots of one source until ctx ends, then drains
// its channel until the source returns, so that a source blocked in a send
// can still exit.
func (c *Config) receive(ctx context.Context, name string, ch <-chan []*v1.Pod, done <-chan struct{}) {
	for {
		select {
		case pods := <-ch:
			if ctx.Err() == nil {
				c.apply(ctx, name, pods)
			}
		case <-done:
			return
		}
	}
}

// apply merges one snapshot and sends its updates.
func (c *Config) apply(ctx context.Context, name string, pods []*v1.Pod) {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	updates, dropped := c.store.merge(name, pods, time.Now())
	// A rejection is logged when it first appears, not with every
	// snapshot that repeats it.
	last, now := c.dropped[name], make(map[string]bool, len(dropped))
	for _, r := range dropped {
		key := r.err.Error()
		if r.pod != nil {
			key = podmodel.FullName(r.pod) + "\x00" + key
		}
		now[key] = true
		if last[key] {
			continue
		}
		if r.pod == nil {
			c.log.Error(r.err, "dropping pod", "source", name)
			continue
		}
		c.log.Error(r.err, "dropping pod", "source", name, "pod", podmodel.FullName(r.pod))
	}
	c.dropped[name] = now
	c.log.V(4).Info("merged snapshot", "source", name, "pods", len(pods), "updates", len(updates))
	for _, u := range updates {
		select {
		case c.updates <- u:
		case <-ctx.Done():
			return
		}
	}
	c.mu.Lock()
	c.seen[name] = true
	c.mu.Unlock()
}
