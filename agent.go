package nodekit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/mirror"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/userns"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/downwardapi"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/hostpath"
)

// Agent is a node agent assembled from nodekit's parts. Create it with New
// and call Run once.
type Agent struct {
	opts Options
	log  logr.Logger

	// runtimeHandlers keeps the handlers of the runtime's Status
	// (noderuntimehandlers.go).
	runtimeHandlers *runtimeHandlerCache

	config   *sources.Config
	runtime  *podruntime.Manager
	cache    pleg.Cache
	events   pleg.EventGenerator
	queue    *podworker.Queue
	workers  *podworker.Workers
	pods     *PodManager
	statuses *status.Manager
	volumes  *volume.Manager
	probes   *probe.Manager
	cgroups  *cgroup.PodManager
	node     *node.Controller  // nil for a standalone agent
	api      *apiserver.Source // nil for a standalone agent
	mirrors  *mirror.Manager   // nil for a standalone agent
	recorder recorder
	spec     podSpecParts
	handler  *Handler
	// capacity is Options.Capacity or, read at the start of Run, the
	// machine's; admission reads it from the sync loop.
	capacity  v1.ResourceList
	localNode // the Node admission checks against when none is registered
	loop      *syncloop.Loop
	served    nodeServerHook // the hooks of Options.NodeServer (nodeserver.go)
	alive     nodeAlive      // garbage collectors, eviction, log rotation (nodealive.go)
	links     *serviceLinks  // Services of the service links; nil standalone (ephemeral.go)
	resizes   *resizes       // allocations and in-place resizes (resize.go)

	// runtimeErr holds the last runtime health check's result (an error
	// value or nil in an errBox).
	runtimeErr atomic.Pointer[errBox]
	ran        atomic.Bool

	runtimeClasses runtimeClasses // RuntimeClass look-ups (runtimeclass.go)

	userns *userns.Manager // nil when disabled (userns.go)
}

type errBox struct{ err error }

// New checks opts, applies the defaults and assembles an Agent. It does no
// I/O and starts no goroutine.
func New(opts Options) (*Agent, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	scopeRuntime(&opts)
	served, err := setUpNodeServer(&opts) // nodeserver.go
	if err != nil {
		return nil, err
	}
	log := opts.Logger.WithValues("node", opts.NodeName)
	a := &Agent{opts: opts, log: log, served: nodeServerHook{served}}
	a.recorder.filter = opts.EventFilter

	a.config = sources.NewConfig(sources.ConfigOptions{Logger: log})
	for _, s := range opts.Sources {
		if err := a.config.Add(s.Name, s.Source); err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
	}
	if opts.KubeClient != nil {
		if err := a.joinCluster(); err != nil {
			return nil, err
		}
	}

	a.pods = NewPodManager()
	statusOpts := status.Options{Observer: opts.OnPodStatus}
	if opts.KubeClient != nil {
		a.mirrors, err = mirror.New(opts.KubeClient, mirror.Options{
			NodeName: opts.NodeName,
			Node:     a.node.Node,
			// Mirror pods follow the API source's watch rather than a list
			// at each housekeeping.
			Pods:     a.api.Pods,
			OnCreate: func(static, _ *v1.Pod) { a.statuses.Requeue(static.UID) },
			Logger:   log,
		})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		statusOpts.Client = opts.KubeClient
		statusOpts.NodeName = opts.NodeName
		statusOpts.Logger = log
		statusOpts.MirrorPod = a.mirrors.MirrorPod
		statusOpts.APIPod = a.pods.GetPodByUID
	}
	a.statuses = status.NewManager(statusOpts)
	probeOpts := opts.Probes
	if probeOpts.Runtime == nil {
		probeOpts.Runtime = opts.Runtime
	}
	probeOpts.Statuses = a.statuses.GetPodStatus
	if probeOpts.Recorder == nil {
		probeOpts.Recorder = &a.recorder
	}
	if probeOpts.Logger.GetSink() == nil {
		probeOpts.Logger = log
	}
	a.probes, err = probe.NewManager(probeOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}

	if err := a.setUpObjects(); err != nil {
		return nil, err
	}
	a.setUpServiceLinks()
	rmOpts := opts.RuntimeManager
	rmOpts.CPUCFSQuotaPeriod = opts.Cgroups.CPUCFSQuotaPeriod
	a.wireRuntime(&rmOpts)
	if err := a.wirePullSecrets(&rmOpts, log); err != nil {
		return nil, err
	}
	a.setUpRuntimeClasses(&rmOpts)
	if err := a.wireUserNamespaces(&rmOpts); err != nil {
		return nil, err
	}
	if rmOpts.Logger.GetSink() == nil {
		rmOpts.Logger = log
	}
	if rmOpts.Recorder == nil {
		rmOpts.Recorder = &a.recorder
	}
	rm, err := podruntime.New(a.cacheRuntimeHandlers(a.served.wrapRuntime(opts.Runtime)), a.served.wrapImages(opts.Images), rmOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	a.runtime = rm

	cache := pleg.NewCache()
	a.cache = cache
	newPLEG := opts.PLEG
	if newPLEG == nil {
		newPLEG = func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
			return pleg.NewAuto(a.served.wrapRuntime(rt), st, c, pleg.EventedOptions{Logger: log, OnRelist: a.served.OnRelist})
		}
	}
	if a.events, err = newPLEG(opts.Runtime, rm, a.cache, log); err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	// Housekeeping reads the runtime's pods from the cache of a PLEG of
	// package pleg (see cachedRuntimePods); another PLEG may keep only
	// some pods there.
	var housekeepingPods RuntimePods = rm
	if a.plegKeepsCache() {
		housekeepingPods = cachedRuntimePods{RuntimePods: rm, cache: cache}
	}

	volOpts := opts.Volumes
	volOpts.RootDir = opts.RootDir
	if volOpts.Logger.GetSink() == nil {
		volOpts.Logger = log
	}
	if volOpts.Plugins == nil {
		hp, err := hostpath.New(hostpath.Options{AllowedHostPaths: volOpts.AllowedHostPaths, NoBind: volOpts.NoSubPathBind, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		volOpts.Plugins = []volume.Plugin{hp, emptydir.New(emptydir.Options{Logger: log})}
		// The downward API of a volume reports the node's allocatable
		// resources: the Node's when joined, else Agent.Allocatable.
		volOpts.Plugins = append(volOpts.Plugins, downwardapi.New(downwardapi.Options{NodeAllocatable: a.allocatableResources, Logger: log}))
		objPlugins, err := a.objectVolumePlugins(log)
		if err != nil {
			return nil, err
		}
		volOpts.Plugins = append(volOpts.Plugins, objPlugins...)
	}
	a.volumes, err = volume.NewManager(volOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}

	cgOpts := opts.Cgroups
	if cgOpts.Logger.GetSink() == nil {
		cgOpts.Logger = log
	}
	a.cgroups, err = cgroup.NewPodManager(cgOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}

	// The parts are wired in dependency order: the per-pod sync over the
	// runtime, volume, cgroup, probe and status parts; the pod workers
	// over the sync; the sync loop's handler over the workers.
	a.queue = podworker.NewQueue()
	a.resizes = a.newResizes()
	syncerConfig := PodSyncerConfig{
		Runtime:  rm,
		Volumes:  a.volumes,
		Cgroups:  a.cgroups,
		Probes:   a.probes,
		Statuses: a.statuses,
		Cache:    a.cache,
		Queue:    a.queue,
		Events:   &a.recorder,
		HostIPs:  a.hostIPs,
		Resizes:  a.resizes,
		Logger:   log,
	}
	if ev, ok := a.events.(interface{ StreamsStatuses() bool }); ok {
		syncerConfig.StatusEvents = ev.StreamsStatuses
	}
	syncer, err := NewPodSyncer(syncerConfig)
	if err != nil {
		return nil, err
	}
	var sync podworker.SyncFuncs = syncer
	if opts.WrapPodSyncer != nil {
		sync = opts.WrapPodSyncer(syncer)
	}
	sync = a.registerPods(sync)
	sync = a.resizes.wrap(sync)
	a.workers, err = podworker.New(sync, podworker.Options{
		Cache:          a.cache,
		Queue:          a.queue,
		ResyncInterval: opts.ResyncInterval,
		BackOffPeriod:  opts.ErrorBackOff,
		// The status manager holds a terminal phase back, and does not
		// delete a pod, until the workers say its containers stopped.
		Terminated: a.statuses.PodTerminated,
		Logger:     log,
		OnSync:     a.served.OnSync,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	if err := a.buildNodeAlive(); err != nil {
		return nil, err
	}
	admit, err := a.admitHandlers()
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	// The eviction manager's check comes first, as the kubelet's.
	admit = append([]admission.Handler{a.EvictionAdmit()}, admit...)
	admit = []admission.Handler{a.resizes.admit(admit)}
	hc := HandlerConfig{
		Pods:     a.pods,
		Workers:  a.workers,
		Statuses: a.statuses,
		Volumes:  a.volumes,
		Probes:   a.probes,
		Cgroups:  a.cgroups,
		Runtime:  housekeepingPods,
		Cache:    a.cache,
		Admit:    admit,
		Logger:   log,
	}
	if a.mirrors != nil {
		hc.Mirrors = a.mirrors
	}
	a.handler, err = NewHandler(hc)
	if err != nil {
		return nil, err
	}

	var h syncloop.SyncHandler = a.handler
	h = a.resizes.wrapHandler(h) // retries deferred resizes (resize.go)
	if opts.WrapHandler != nil {
		h = opts.WrapHandler(h)
	}
	a.loop, err = syncloop.New(h, syncloop.Config{
		Updates:            a.config.Updates(),
		PLEG:               a.events.Events(),
		Liveness:           a.probes.Liveness(),
		Readiness:          a.probes.Readiness(),
		Startup:            a.probes.Startup(),
		Extra:              opts.Extra,
		Pods:               a.pods,
		Work:               a.queue,
		SourcesReady:       a.config.SourcesReady,
		RuntimeHealthy:     a.runtimeHealthy,
		SyncPeriod:         opts.SyncPeriod,
		HousekeepingPeriod: opts.HousekeepingPeriod,
		Logger:             log,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	a.runtimeErr.Store(&errBox{err: errRuntimeNotChecked})
	if err := a.attachNodeServer(); err != nil {
		return nil, err
	}
	return a, nil
}

// joinCluster adds the API server's pods as a source and the Node
// controller.
func (a *Agent) joinCluster() error {
	srcOpts := withCheckpoint(a.opts.APISource, a.opts.RootDir)
	srcOpts.NodeName = a.opts.NodeName
	if srcOpts.Logger.GetSink() == nil {
		srcOpts.Logger = a.log
	}
	src, err := apiserver.New(a.opts.KubeClient, srcOpts)
	if err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	if err := a.config.Add(sources.APIServerSource, src); err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	a.api = src

	nodeOpts := a.opts.Node
	nodeOpts.NodeName = a.opts.NodeName
	nodeOpts.MaxPods = a.opts.MaxPods
	nodeOpts.Capacity = a.opts.Capacity
	if nodeOpts.Logger.GetSink() == nil {
		nodeOpts.Logger = a.opts.Logger // the node package names the node itself
	}
	a.nodeAliveNodeOptions(&nodeOpts)
	if nodeOpts.DeclaredFeatures == nil {
		nodeOpts.DeclaredFeatures = declaredFeatures() // declaredfeatures.go
	}
	if nodeOpts.Health == nil {
		// Ready as the kubelet: the runtime answers and the PLEG relists.
		nodeOpts.Health = func() error { return a.runtimeHealthy(nil) }
	}
	if nodeOpts.RuntimeVersion == nil {
		rt := a.opts.Runtime
		nodeOpts.RuntimeVersion = func(ctx context.Context) (string, error) {
			v, err := rt.Version(ctx, "v1")
			if err != nil {
				return "", err
			}
			return v.GetRuntimeName() + "://" + v.GetRuntimeVersion(), nil
		}
	}
	a.nodeRuntimeHandlers(&nodeOpts) // noderuntimehandlers.go
	a.node, err = node.New(a.opts.KubeClient, nodeOpts)
	if err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	return nil
}

// hostIPs are the node's internal addresses, for pod statuses and the
// environment's HOST_IP: the Node's when the agent joined a cluster, else
// Options.Node.InternalIP when set.
func (a *Agent) hostIPs() []string {
	if a.node == nil {
		if ip := a.opts.Node.InternalIP; ip != nil {
			return []string{ip.String()}
		}
		return nil
	}
	n, ok := a.node.Node()
	if !ok {
		return nil
	}
	var ips []string
	for _, addr := range n.Status.Addresses {
		if addr.Type == v1.NodeInternalIP {
			ips = append(ips, addr.Address)
		}
	}
	return ips
}

// Run runs the agent until ctx ends. It returns nil then, after every
// goroutine it started has exited; pods keep running in the runtime, so a
// restarted agent finds them again. Run may be called only once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return errors.New("nodekit: Agent.Run called twice")
	}
	a.log.Info("Starting node agent", "sources", len(a.opts.Sources), "maxPods", a.opts.MaxPods)
	g, ctx := errgroup.WithContext(ctx)
	run := func(name string, f func(context.Context) error) {
		g.Go(func() error {
			if err := f(ctx); err != nil {
				return fmt.Errorf("nodekit: %s: %w", name, err)
			}
			return nil
		})
	}
	a.capacity = a.opts.Capacity
	if a.capacity == nil {
		m, err := node.ReadMachine("")
		if err != nil {
			return fmt.Errorf("nodekit: reading the machine's capacity (or set Options.Capacity): %w", err)
		}
		a.capacity = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewQuantity(m.CPUs, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		}
	}
	if err := a.prepareNodeAlive(); err != nil {
		return err
	}
	if err := a.cgroups.EnsureNode(); err != nil {
		return fmt.Errorf("nodekit: setting up the node's cgroups (set Options.Cgroups.Disabled on a host the agent does not own): %w", err)
	}
	defer a.startEvents(ctx)()
	a.checkRuntime(ctx)
	run("runtime status", a.watchRuntime)
	run("pleg", a.events.Run)
	run("volume manager", a.volumes.Run)
	run("probes", a.probes.Run)
	run("status manager", a.statuses.Run)
	run("pod workers", a.workers.Run)
	run("pod resizes", a.resizes.Run)
	a.runRuntimeClasses(run)
	run("sources", a.config.Run)
	if a.node != nil {
		run("node", a.node.Run)
	}
	if a.opts.NodeServer != nil {
		run("node server", a.opts.NodeServer.Run)
	}
	a.runNodeAlive(run)
	a.runServiceLinks(run)
	a.runUserNamespaces(run)
	run("sync loop", a.loop.Run)
	err := g.Wait()
	a.log.Info("Node agent stopped")
	return err
}

// watchRuntime checks the runtime's health every RuntimeStatusPeriod.
func (a *Agent) watchRuntime(ctx context.Context) error {
	t := time.NewTicker(a.opts.RuntimeStatusPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			a.checkRuntime(ctx)
		}
	}
}

func (a *Agent) checkRuntime(ctx context.Context) {
	err := a.runtime.Status(ctx)
	prev := a.runtimeErr.Swap(&errBox{err: err})
	switch {
	case err != nil && (prev.err == nil || prev.err.Error() != err.Error()):
		a.log.Error(err, "Container runtime not healthy")
	case err == nil && prev.err != nil:
		a.log.Info("Container runtime healthy")
		// The first check ends no outage: the collectors' own periods
		// cover what an earlier run left.
		if prev.err != errRuntimeNotChecked {
			a.runtimeRecovered()
		}
	}
}

// errRuntimeNotChecked is the runtime's health before its first check.
var errRuntimeNotChecked = errors.New("nodekit: runtime not checked yet")

// runtimeHealthy is the sync loop's gate: the last runtime check and the
// PLEG's health.
func (a *Agent) runtimeHealthy(context.Context) error {
	if err := a.runtimeErr.Load().err; err != nil {
		return err
	}
	return a.events.Healthy()
}

// Healthy reports whether the agent works: its sync loop iterates, the
// runtime answers and the PLEG relists.
func (a *Agent) Healthy() error {
	return errors.Join(a.loop.Healthy(), a.runtimeHealthy(nil))
}

// PodStatus returns the status the agent holds for the pod. Its slices
// and pointers are shared with the status held (see package status):
// treat it as read-only.
func (a *Agent) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	return a.statuses.GetPodStatus(uid)
}

// Pods returns the pods the agent has been asked to run (admitted or not),
// in no particular order. They must not be modified.
func (a *Agent) Pods() []*v1.Pod { return a.pods.Pods() }

// SourcesReady reports whether every source delivered its first snapshot.
func (a *Agent) SourcesReady() bool { return a.config.SourcesReady() }
