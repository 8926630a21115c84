// Package hollow attaches hollow nodes to an API server: nodekit agents,
// each with a node name of its own and the in-memory runtime
// (runtimetest), run in the calling process. Pods bound to them run in
// memory only; their statuses, Nodes, Leases and events are written to the
// API server as a kubelet's would be. An operator's or scheduler's test
// suite starts them next to its own API server, as it starts envtest's:
//
//	nodes, err := hollow.Start(ctx, restConfig, 10, hollow.Options{})
//	if err != nil { ... }
//	defer nodes.Stop()
//	// nodes.Names() are Ready; pods bound to them run.
//
// Stop stops the agents and leaves their Nodes registered (as a stopped
// kubelet does: they turn NotReady when their Leases expire).
//
// # Where they differ from a lone agent
//
// What each node writes is a kubelet's, with two differences that make a
// pod start one write, as on KWOK's simulated nodes: the events default
// to Warnings only (Options.EventFilter), and a pod's sync keeps the
// statuses it sets unwritten for up to a minute rather than 2s
// (nodekit.Options.StatusMaxHold): the in-memory runtime pulls no image,
// so a sync waits only for the CPU, and a machine loaded by a thousand
// pod starts at once would otherwise have the Pending status a sync began
// with written before its Running one.
//
// Their PLEG's channels (its events, and the runtime's events it
// consumes) hold 256 events rather than the kubelet's 1000: a channel's
// buffer is allocated whole, and the two were a tenth of an idle node's
// memory; a burst that fills one is late by a relist period, not lost.
//
// Their directories (pod directories, container logs)
// are by default in a temporary directory on /dev/shm, a tmpfs, removed
// by Stop: nothing in them outlives the nodes, and on a disk the file
// system's journal and the fsyncs of each write (which a kubelet makes so
// that its state survives a crash) cost a pod start more CPU than
// everything else together (1000 nodes × 1 pod: 7.4–11.8 ms of CPU a pod
// start on ext4, 3.7–4.2 on tmpfs). They hold about 16 KiB of tmpfs a
// node with one pod. Options.Dir puts them elsewhere. Nor do the nodes
// keep the API-server source's checkpoint of their pods
// (apiserver.Options.NoCheckpoint), which serves an agent restarted while
// the API server is down, or their image pull records in a file
// (podruntime.Options.NoPullRecordsFile), rewritten at every pull: a
// hollow node is never restarted on its directory (the kubelet has no
// such checkpoint either).
package hollow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// MaxNodes bounds the nodes of one Start.
const MaxNodes = 10000

// Options configure the nodes of Start. The zero value is usable.
type Options struct {
	// Prefix names the nodes <Prefix>-<i>, i from 0. Defaults to
	// "hollow-node".
	Prefix string
	// Capacity is each node's capacity. Defaults to 8 CPUs and 16Gi of
	// memory (the host's, n times over, would mislead a scheduler).
	Capacity v1.ResourceList
	// EventFilter keeps the events it returns true for. Defaults to
	// events.Warnings: a pod start writes the pod's status only, not the
	// Normal Pulled, Created and Started events. Set it to a function
	// that returns true to write every event.
	EventFilter func(eventtype, reason string) bool
	// Dir holds the nodes' directories (<Dir>/<name>). Defaults to a
	// temporary directory that Stop removes, on /dev/shm when it is a
	// tmpfs (see the package doc).
	Dir string
	// ReadyTimeout bounds how long Start waits for the shared watches'
	// first lists and every Node to be Ready. Defaults to 1m plus 1m per
	// 200 nodes.
	ReadyTimeout time.Duration
	// Configure, when set, is called with each node's options before its
	// agent is built, to change them (Admit, WrapHandler, Node labels and
	// taints, ...).
	Configure func(i int, o *nodekit.Options)
	// Logger receives the agents' logs. Defaults to discarding them.
	Logger logr.Logger
	// Unshared gives each node its own watches (pods, Node, Services,
	// RuntimeClasses), event broadcaster and scheme, a GET of its Node
	// each status pass, and goroutines of its own for its periodic work
	// (status passes, Lease renewals, pod status writes, collections) and
	// its pod deliveries, as a lone agent has; for comparison. By default
	// the nodes share one of each per process, as kubelets on one
	// machine would if they could: what each node writes to the API
	// server is the same.
	Unshared bool
}

// Nodes are the running hollow nodes of one Start.
type Nodes struct {
	names  []string
	cancel context.CancelFunc
	dir    string
	rmDir  bool

	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
	rts  []*runtimetest.Runtime
	// shared is what the nodes share, nil with Options.Unshared.
	shared *shared
	stop   sync.Once
	err    error
}

// Start starts n hollow nodes on the API server of cfg and returns once
// every Node is registered and Ready. The agents run until Stop, or until
// ctx ends. cfg is copied, not changed.
func Start(ctx context.Context, cfg *rest.Config, n int, opts Options) (*Nodes, error) {
	if cfg == nil {
		return nil, errors.New("hollow: a rest config is required")
	}
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("hollow: %d nodes: between 1 and %d", n, MaxNodes)
	}
	if opts.Prefix == "" {
		opts.Prefix = "hollow-node"
	}
	if opts.Capacity == nil {
		opts.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}
	}
	if opts.EventFilter == nil {
		opts.EventFilter = events.Warnings
	}
	if opts.ReadyTimeout < 0 {
		return nil, fmt.Errorf("hollow: negative ReadyTimeout %s", opts.ReadyTimeout)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = time.Minute + time.Duration(n/200)*time.Minute
	}
	// One client for every agent: one connection pool, and one rate
	// limiter sized as n kubelets' (50 QPS, burst 100 each).
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 50*float32(n), 100*n
	c.ContentType = "application/vnd.kubernetes.protobuf" // as the kubelet's
	// No gzip reader held by each watch stream: the API server compresses
	// an answer only when asked, which Go's transport does by default.
	c.DisableCompression = !opts.Unshared
	client, err := kubeclient.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("hollow: %w", err)
	}
	ns := &Nodes{dir: opts.Dir}
	if ns.dir == "" {
		if ns.dir, err = os.MkdirTemp(memoryDir(), "hollow-nodes-"); err != nil {
			return nil, fmt.Errorf("hollow: %w", err)
		}
		ns.rmDir = true
	}
	runCtx, cancel := context.WithCancel(ctx)
	ns.cancel = cancel
	wctx, wcancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer wcancel()
	if !opts.Unshared {
		if ns.shared, err = newShared(client, opts.Logger); err != nil {
			ns.Stop()
			return nil, err
		}
		if err := ns.shared.start(runCtx, wctx); err != nil {
			ns.Stop()
			return nil, err
		}
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d", opts.Prefix, i)
		rt := runtimetest.New(runtimetest.Options{}) // pulls any image, runs nothing
		ns.rts = append(ns.rts, rt)
		o := nodeOptions(name, filepath.Join(ns.dir, name), client, rt, opts)
		if ns.shared != nil {
			ns.shared.configure(name, &o)
		}
		if opts.Configure != nil {
			opts.Configure(i, &o)
		}
		if o.PLEG == nil && o.NodeServer == nil {
			// Not with a node server, to which the agent's default
			// PLEG reports its relists.
			o.PLEG = newPLEG
		}
		agent, err := nodekit.New(o)
		if err != nil {
			ns.Stop()
			return nil, fmt.Errorf("hollow: node %s: %w", name, err)
		}
		ns.names = append(ns.names, name)
		ns.wg.Go(func() {
			if err := agent.Run(runCtx); err != nil {
				ns.mu.Lock()
				ns.errs = append(ns.errs, fmt.Errorf("node %s: %w", name, err))
				ns.mu.Unlock()
			}
		})
	}
	if err := ns.waitReady(wctx, client); err != nil {
		ns.Stop()
		return nil, err
	}
	return ns, nil
}

// maxHold is how long the sync of a pod on a hollow node keeps the
// statuses it sets unwritten (nodekit.Options.StatusMaxHold), where a
// lone agent keeps them 2s: the in-memory runtime pulls no image, so a
// sync waits only for the CPU, and a pod start is one status write
// (Running) however long a loaded machine takes to run the syncs of a
// thousand pods at once. A lone agent writes Pending after 2s, as the
// kubelet's first status pass would during an image pull.
const maxHold = time.Minute

// nodeOptions are the options of hollow node name, in dir, before
// Options.Configure.
func nodeOptions(name, dir string, client kubeclient.Interface, rt *runtimetest.Runtime, opts Options) nodekit.Options {
	return nodekit.Options{
		NodeName:   name,
		KubeClient: client,
		Runtime:    rt,
		RootDir:    filepath.Join(dir, "root"),
		// A node never restarts on its directory, which Stop removes:
		// the image pull records and the API source's checkpoint would
		// never be read.
		RuntimeManager: podruntime.Options{PodLogsDir: filepath.Join(dir, "logs"), NoPullRecordsFile: true},
		APISource:      apiserver.Options{NoCheckpoint: true},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true}, // no processes to confine
		Node:           node.Options{Capacity: opts.Capacity},
		EventFilter:    opts.EventFilter,
		Logger:         opts.Logger,
		StatusMaxHold:  maxHold,
	}
}

// plegCapacity is the capacity of a hollow node's PLEG channels (its
// events, and the runtime's events it consumes), where a lone agent's,
// as the kubelet's, hold 1000: a channel's buffer is allocated whole when
// it is made, and the two held 8 KiB each, a tenth of an idle hollow
// node's resident set. A node of 110 pods (the default MaxPods) starting
// them all at once makes about 300 events; the events a full channel
// drops are owed to their pods and sent again a relist period (1s) later
// (package pleg), so a burst beyond it is late, not lost.
const plegCapacity = 256

// newPLEG is a hollow node's PLEG (nodekit.Options.PLEG, unless
// Options.Configure sets one, or a NodeServer): the agent's default, the
// evented PLEG, with channels of plegCapacity.
func newPLEG(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
	return pleg.NewAuto(rt, st, c, pleg.EventedOptions{Logger: log, ChannelCapacity: plegCapacity})
}

// waitReady polls the Nodes until every one is Ready.
func (ns *Nodes) waitReady(ctx context.Context, client kubeclient.Interface) error {
	pending := map[string]bool{}
	for _, n := range ns.names {
		pending[n] = true
	}
	// kubeclient's node client lists too (its NodeInterface does not say so).
	nodes, ok := client.CoreV1().Nodes().(interface {
		List(context.Context, metav1.ListOptions) (*v1.NodeList, error)
	})
	if !ok {
		return errors.New("hollow: the client cannot list Nodes")
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		list, err := nodes.List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				if pending[list.Items[i].Name] && ready(&list.Items[i]) {
					delete(pending, list.Items[i].Name)
				}
			}
			if len(pending) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hollow: %d of %d nodes not Ready: %w", len(pending), len(ns.names), context.Cause(ctx))
		case <-t.C:
		}
	}
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Names returns the names of the nodes, in order.
func (ns *Nodes) Names() []string { return append([]string(nil), ns.names...) }

// Stop stops the agents, waits for them to return, and removes the nodes'
// directory when Start made it. It returns the agents' errors. It may be
// called more than once.
func (ns *Nodes) Stop() error {
	ns.stop.Do(func() {
		ns.cancel()
		ns.wg.Wait()
		if ns.shared != nil {
			ns.shared.wait()
		}
		for _, rt := range ns.rts {
			rt.Close()
		}
		ns.mu.Lock()
		ns.err = errors.Join(ns.errs...)
		ns.mu.Unlock()
		if ns.rmDir {
			if err := os.RemoveAll(ns.dir); err != nil {
				ns.err = errors.Join(ns.err, err)
			}
		}
	})
	return ns.err
}
