package nodekit

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/env"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/internal/allocation"
	"github.com/nodekit/nodekit/internal/runtimeclass"
	"github.com/nodekit/nodekit/internal/runtimehealth"
	"github.com/nodekit/nodekit/internal/servicelinks"
	"github.com/nodekit/nodekit/internal/upkeep"
	"github.com/nodekit/nodekit/mirror"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/synchandler"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/userns"
	"github.com/nodekit/nodekit/volume"
)

// apiCheckpointFile is where the agent keeps the API server's pods for the
// node, below its RootDir: it runs them while the API server is
// unreachable (see apiserver.Options.CheckpointPath), where the kubelet
// runs none of them until the server answers.
const apiCheckpointFile = "checkpoints/apiserver-pods.json"

// parts are an assembled agent: what its methods read, and group, the
// long-running parts in the order they start.
type parts struct {
	log      logr.Logger
	group    run.Group
	config   *sources.Config
	statuses *status.Manager
	cgroups  *cgroup.PodManager
	handler  *synchandler.Handler
	loop     *syncloop.Loop
	pleg     pleg.EventGenerator
	health   *runtimehealth.Checker
	upkeep   *upkeep.Manager
}

// runtimeHealthy is the sync loop's gate: the last runtime check and the
// PLEG's health.
func (p *parts) runtimeHealthy(context.Context) error {
	if err := p.health.Err(); err != nil {
		return err
	}
	return p.pleg.Healthy()
}

// wire builds the agent's default parts from o (defaulted), in dependency
// order, and lists those that run in the order they start: producers
// before their consumers, the sync loop last, so that it stops first.
// Every part is a package of its own; wire only connects them.
func wire(o Options) (*parts, error) {
	p := &parts{log: o.Logger.WithValues("node", o.NodeName)}
	log := p.log
	// The agent's identity on the runtime: every sandbox and container
	// it creates carries runtime.LabelAgent=<NodeName>, and every list it
	// makes sees only those, so agents of different names share a
	// runtime and a restarted agent adopts its pods (the kubelet owns its
	// runtime instead). A Runtime scoped already keeps its identity.
	o.Runtime = runtime.WithIdentity(o.Runtime, o.NodeName)
	served, err := setUpNodeServer(&o)
	if err != nil {
		return nil, err
	}
	recorder := events.NewRecorder(o.EventFilter)
	if o.Events != nil {
		recorder.Set(o.Events)
	}
	handlers := &runtimehealth.HandlerCache{}

	// Sources, and with a KubeClient the cluster's: the API server's pods
	// and the mirror pods (the Node comes after the upkeep, whose pressure
	// conditions and reservations it reports).
	p.config = sources.NewConfig(sources.ConfigOptions{Logger: log})
	for _, s := range o.Sources {
		if n, ok := s.Source.(sources.NodeNamer); ok {
			if err := n.SetNodeName(o.NodeName); err != nil {
				return nil, fmt.Errorf("nodekit: source %q: %w", s.Name, err)
			}
		}
		if l, ok := s.Source.(sources.LoggerSetter); ok {
			l.SetLogger(log.WithName("sources").WithValues("source", s.Name))
		}
		if err := p.config.Add(s.Name, s.Source); err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
	}
	var (
		api        *apiserver.Source
		mirrors    *mirror.Manager
		podManager = podmanager.New()
		// Built later; the closures of the parts built before them read
		// them once the agent runs.
		nodeCtl *node.Controller
		handler *synchandler.Handler
		workers *podworker.Workers
		keeper  *upkeep.Manager

		localOnce sync.Once
		local     *v1.Node
	)
	// The Node admission checks pods against: the registered one, else
	// the agent's own (localNode), made once the capacity is known.
	admissionNode := func() *v1.Node {
		if nodeCtl != nil {
			if n, ok := nodeCtl.Node(); ok {
				return n
			}
		}
		localOnce.Do(func() { local = localNode(o, keeper.Capacity(), keeper.Allocatable()) })
		return local
	}
	activePods := func() []*v1.Pod {
		if handler == nil {
			return nil
		}
		return handler.ActivePods()
	}
	hostIPs := func() []string { return node.HostIPs(nodeCtl, o.Node.InternalIP) }
	// What the downward API and the environment report of the node: the
	// Node's allocatable resources when joined, else the agent's own.
	nodeAllocatable := func() v1.ResourceList {
		if nodeCtl != nil {
			if n, ok := nodeCtl.Node(); ok && n.Status.Allocatable != nil {
				return n.Status.Allocatable
			}
		}
		return keeper.Allocatable()
	}
	if client := o.KubeClient; client != nil {
		srcOpts := o.APISource
		if srcOpts.CheckpointPath == "" && !srcOpts.NoCheckpoint {
			srcOpts.CheckpointPath = filepath.Join(o.RootDir, apiCheckpointFile)
		}
		if srcOpts.Periodic == nil {
			srcOpts.Periodic = o.Periodic
		}
		orLogger(&srcOpts.Logger, log)
		if api, err = apiserver.New(client, o.NodeName, srcOpts); err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		if err := p.config.Add(sources.APIServerSource, api); err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		mirrors, err = mirror.New(client, mirror.Options{
			NodeName: o.NodeName,
			Node: func() (*v1.Node, bool) {
				if nodeCtl == nil {
					return nil, false
				}
				return nodeCtl.Node()
			},
			// Mirror pods follow the API source's watch rather than a list
			// at each housekeeping.
			Pods:     api.Pods,
			OnCreate: func(static, _ *v1.Pod) { p.statuses.Requeue(static.UID) },
			Logger:   log,
		})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
	}

	// Pod statuses and probes.
	statusOpts := status.Options{Observer: o.OnPodStatus, OnForget: served.OnPodForgotten, MaxHold: o.StatusMaxHold, Periodic: o.Periodic}
	if mirrors != nil {
		statusOpts.Client, statusOpts.NodeName, statusOpts.Logger = o.KubeClient, o.NodeName, log
		statusOpts.MirrorPod, statusOpts.APIPod = mirrors.MirrorPod, podManager.GetPodByUID
	}
	p.statuses = status.NewManager(statusOpts)
	probeOpts := o.Probes
	if probeOpts.Runtime == nil {
		probeOpts.Runtime = o.Runtime
	}
	if probeOpts.Recorder == nil {
		probeOpts.Recorder = recorder
	}
	orLogger(&probeOpts.Logger, log)
	probes, err := probe.NewManager(p.statuses.GetPodStatus, probeOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}

	// What pods' specs refer to: ConfigMaps and Secrets (Options.Objects,
	// else the API server's through a cache, as the kubelet's managers),
	// Services of the service links, RuntimeClasses.
	objs, objCache, err := podObjects(o)
	if err != nil {
		return nil, err
	}
	var links *servicelinks.Informer
	services := o.Services
	if services == nil && o.KubeClient != nil {
		links = servicelinks.New(o.KubeClient, func() bool { _, listed := api.Pods(); return listed })
		services = links
	}
	var classes *runtimeclass.Resolver
	switch {
	case o.RuntimeClasses != nil:
		classes = runtimeclass.New(o.RuntimeClasses)
	case o.KubeClient != nil:
		classes = runtimeclass.NewInformer(o.KubeClient)
	}

	// The pod-level runtime manager and the volume manager make and
	// remove pods' files and directories within one bound: under churn,
	// each goroutine blocked in such a system call holds a thread, which
	// the Go runtime keeps for as long as the agent runs.
	fileWork := make(chan struct{}, fileWorkParallelism)

	// The pod-level runtime manager.
	rmOpts := o.RuntimeManager
	if rmOpts.FileWork == nil {
		rmOpts.FileWork = fileWork
	}
	if rmOpts.RootDir == "" {
		rmOpts.RootDir = o.RootDir
	}
	if rmOpts.Env == nil {
		rmOpts.Env = env.New(env.Options{Objects: objs, NodeAllocatable: nodeAllocatable, HostIPs: hostIPs, Recorder: recorder, Services: services})
	}
	if rmOpts.Secrets == nil && objs != nil {
		rmOpts.Secrets = objs
	}
	if rmOpts.NodeCredentials, err = nodeCredentials(o, rmOpts.NodeCredentials, log); err != nil {
		return nil, err
	}
	if classes != nil && rmOpts.PodRuntimeHandler == nil {
		rmOpts.PodRuntimeHandler = classes.PodHandler
	}
	var users *userns.Manager
	if !o.UserNamespaces.Disabled && rmOpts.UserNamespaces == nil {
		users, err = userns.New(userns.Options{
			RootDir: o.RootDir, Runtime: o.Runtime, IDsPerPod: o.UserNamespaces.IDsPerPod, Range: o.UserNamespaces.Range,
			MaxPods: o.Node.MaxPods, CleanupPeriod: o.HousekeepingPeriod, Periodic: o.Periodic, Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		rmOpts.UserNamespaces = users
	}
	orLogger(&rmOpts.Logger, log)
	if rmOpts.Recorder == nil {
		rmOpts.Recorder = recorder
	}
	handlers.RuntimeService = served.wrapRuntime(o.Runtime)
	rm, err := podruntime.New(handlers, served.wrapImages(o.Images), rmOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	p.health = runtimehealth.NewChecker(rm.Status, runtimehealth.Options{
		Period:    o.RuntimeStatusPeriod,
		Changes:   runtimehealth.StatusChanges(o.Runtime),
		Periodic:  o.Periodic,
		OnRecover: func() { keeper.RuntimeRecovered() },
		Logger:    log,
	})

	// The PLEG and its cache.
	cache := pleg.NewCache()
	newPLEG := o.PLEG
	if newPLEG == nil {
		newPLEG = func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
			return pleg.NewAuto(served.wrapRuntime(rt), st, c, pleg.EventedOptions{Logger: log, OnRelist: served.OnRelist})
		}
	}
	if p.pleg, err = newPLEG(o.Runtime, rm, cache, log); err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	// Housekeeping and the log rotator read the runtime's pods from the
	// cache of a PLEG of package pleg, which keeps every pod there;
	// another PLEG may keep only some.
	var keptCache *pleg.StatusCache
	switch p.pleg.(type) {
	case *pleg.Generic, *pleg.Evented:
		keptCache = cache
	}

	// Volumes and cgroups.
	volOpts := o.Volumes
	if volOpts.Periodic == nil {
		volOpts.Periodic = o.Periodic
	}
	if volOpts.FileWork == nil {
		volOpts.FileWork = fileWork
	}
	orLogger(&volOpts.Logger, log)
	if volOpts.Plugins == nil {
		if volOpts.Plugins, err = volumePlugins(o, volOpts, objs, nodeAllocatable, log); err != nil {
			return nil, err
		}
	}
	volumes, err := volume.NewManager(o.RootDir, volOpts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	cgOpts := o.Cgroups
	if cgOpts.StateDir == "" {
		// Its records of the pod cgroups it made: only those are orphans.
		cgOpts.StateDir = filepath.Join(o.RootDir, "pod-cgroups")
	}
	orLogger(&cgOpts.Logger, log)
	if p.cgroups, err = cgroup.NewPodManager(cgOpts); err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}

	// The allocation manager, the per-pod sync and the pod workers.
	queue := podworker.NewQueue()
	allocations, err := allocation.New(allocation.Config{
		Periodic:     o.Periodic,
		RootDir:      o.RootDir,
		Known:        func(uid types.UID) bool { _, ok := podManager.GetPodByUID(uid); return ok },
		PodByUID:     podManager.GetPodByUID,
		ActivePods:   activePods,
		Allocatable:  func() v1.ResourceList { return admissionNode().Status.Allocatable },
		SourcesReady: p.config.SourcesReady,
		TriggerSync: func(pod *v1.Pod) {
			if workers != nil {
				workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
			}
		},
		Recorder:    recorder,
		ResizeError: rm.ResizeError,
		Cached: func(uid types.UID) *runtime.PodStatus {
			st, err := cache.Get(uid)
			if err != nil {
				return nil
			}
			return st
		},
		PodCgroup: func(pod *v1.Pod) *status.PodCgroupState { return podsync.PodCgroupState(p.cgroups, pod) },
		Logger:    log,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	syncConfig := podsync.Config{
		Runtime: rm, Volumes: volumes, Cgroups: p.cgroups, Probes: probes, Statuses: p.statuses,
		Cache: cache, Queue: queue, Events: recorder, HostIPs: hostIPs, Resizes: allocations, Logger: log,
	}
	if objCache != nil {
		syncConfig.Objects = objCache
	}
	if ev, ok := p.pleg.(interface{ StreamsStatuses() bool }); ok {
		syncConfig.StatusEvents = ev.StreamsStatuses
	}
	syncer, err := podsync.New(syncConfig)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	var sync podworker.SyncFuncs = syncer
	if o.WrapPodSyncer != nil {
		sync = o.WrapPodSyncer(syncer)
	}
	workers, err = podworker.New(allocations.WrapSync(sync), podworker.Options{
		Cache:          cache,
		Queue:          queue,
		ResyncInterval: o.ResyncInterval,
		BackOffPeriod:  o.ErrorBackOff,
		// The status manager holds a terminal phase back, and does not
		// delete a pod, until the workers say its containers stopped.
		Terminated: p.statuses.PodTerminated,
		Logger:     log,
		OnSync:     served.OnSync,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}

	// What keeps the node alive: collectors, eviction, log rotation.
	keeper, err = upkeep.New(o.NodeResources, upkeep.Parts{
		NodeName: o.NodeName, RootDir: o.RootDir, Capacity: o.Node.Capacity,
		Cgroups: o.Cgroups, CgroupManager: p.cgroups, PodLogsDir: o.RuntimeManager.PodLogsDir,
		Runtime: o.Runtime, Images: o.Images, PodRuntime: rm, Cache: keptCache,
		Workers: workers, SourcesReady: p.config.SourcesReady, ActivePods: activePods,
		PodByUID: podManager.GetPodByUID, PodDirs: volumes.PodDirs, Recorder: recorder, Logger: log,
		Periodic: o.Periodic,
		Changes: func() (uint64, bool) {
			if handler == nil {
				return 0, false
			}
			return handler.ChangeCount()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	p.upkeep = keeper
	if o.KubeClient != nil {
		// The Node: registration, status (with the pressure conditions
		// and reservations of the upkeep) and Lease.
		nodeOpts := o.Node
		if nodeOpts.Periodic == nil {
			nodeOpts.Periodic = o.Periodic
		}
		orLogger(&nodeOpts.Logger, o.Logger) // the node package names the node itself
		if nodeOpts.DeclaredFeatures == nil {
			nodeOpts.DeclaredFeatures = node.DeclaredFeatures()
		}
		if nodeOpts.Health == nil {
			// Ready as the kubelet: the runtime answers and the PLEG relists.
			nodeOpts.Health = func() error { return p.runtimeHealthy(nil) }
		}
		if nodeOpts.RuntimeVersion == nil {
			rt := o.Runtime
			nodeOpts.RuntimeVersion = func(ctx context.Context) (string, error) {
				v, err := rt.Version(ctx, "v1")
				if err != nil {
					return "", err
				}
				return v.GetRuntimeName() + "://" + v.GetRuntimeVersion(), nil
			}
		}
		if nodeOpts.RuntimeHandlers == nil {
			nodeOpts.RuntimeHandlers = handlers.Handlers
		}
		if nodeOpts.RuntimeFeatures == nil {
			nodeOpts.RuntimeFeatures = handlers.Features
		}
		keeper.NodeOptions(&nodeOpts)
		if nodeCtl, err = node.New(o.KubeClient, o.NodeName, nodeOpts); err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
	}

	// The sync loop's handler, with the admission checks: the eviction
	// manager's first, as the kubelet's, seen through the allocations.
	admit, err := admissionChecks(o, classes, handlers.Names, admissionNode, handlers.SupplementalGroupsPolicy, recorder)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	hc := synchandler.Config{
		Pods: podManager, Workers: workers, Statuses: p.statuses, Volumes: volumes, Probes: probes,
		Cgroups: p.cgroups, Runtime: rm, Cache: cache, Logger: log,
		Admit: []admission.Handler{allocations.Admit(append([]admission.Handler{keeper.EvictionAdmit()}, admit...))},
	}
	if keptCache != nil {
		hc.Runtime = synchandler.CachedRuntimePods(rm, keptCache)
	}
	if mirrors != nil {
		hc.Mirrors = mirrors
	}
	if handler, err = synchandler.New(hc); err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	p.handler = handler
	var h syncloop.SyncHandler = allocations.WrapHandler(handler)
	if o.WrapHandler != nil {
		h = o.WrapHandler(h)
	}
	p.loop, err = syncloop.New(h, syncloop.Config{
		Updates:            p.config.Updates(),
		PLEG:               p.pleg.Events(),
		Liveness:           probes.Liveness(),
		Readiness:          probes.Readiness(),
		Startup:            probes.Startup(),
		Extra:              o.Extra,
		Pods:               handler.Pods(),
		Work:               queue,
		SourcesReady:       p.config.SourcesReady,
		RuntimeHealthy:     p.runtimeHealthy,
		SyncPeriod:         o.SyncPeriod,
		HousekeepingPeriod: o.HousekeepingPeriod,
		// A pod whose worker finished is cleaned up at once, not at the
		// next tick.
		HousekeepingDue: workers.Ended(),
		Logger:          log,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	if err := attachNodeServer(o, p, log); err != nil {
		return nil, err
	}

	// What runs, in the order it starts; it stops in reverse.
	g := &p.group
	if o.Events == nil && o.KubeClient != nil {
		add(g, "events", recorder.ToAPIServer(o.KubeClient, o.NodeName, log))
	}
	add(g, "runtime status", p.health)
	add(g, "pleg", p.pleg)
	add(g, "volume manager", volumes)
	add(g, "probes", probes)
	add(g, "status manager", p.statuses)
	add(g, "pod workers", workers)
	add(g, "pod resizes", allocations)
	if classes != nil {
		add(g, "runtime classes", classes)
	}
	add(g, "sources", p.config)
	if nodeCtl != nil {
		add(g, "node", nodeCtl)
	}
	if o.NodeServer != nil {
		add(g, "node server", o.NodeServer)
	}
	if err := keeper.AddTo(g); err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	if links != nil {
		add(g, "services", links)
	}
	if users != nil {
		add(g, "user namespaces", users)
	}
	// Housekeeping's removals of gone pods' runtime objects, off the
	// loop; it stops after the loop.
	add(g, "pod removals", handler)
	add(g, "sync loop", p.loop)
	return p, nil
}

// fileWorkParallelism bounds the goroutines of the runtime manager and
// the volume manager that make or remove pods' files and directories at
// once (podruntime.Options.FileWork, volume.Options.FileWork). Each had a
// bound of 4 of its own; together they kept 8 goroutines in system calls
// in a churn, and the Go runtime a thread for each.
const fileWorkParallelism = 4

// add adds a part to a group that has not started, where Add cannot fail.
func add(g *run.Group, name string, r run.Runnable) { _ = g.Add(name, r) }

// orLogger sets *l to log when it has no sink: a part's own logger, if
// the user gave one, wins over the agent's.
func orLogger(l *logr.Logger, log logr.Logger) {
	if l.GetSink() == nil {
		*l = log
	}
}
