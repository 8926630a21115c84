// Package nodekit assembles a Kubernetes node agent from parts: a kubelet
// you build yourself.
//
// An Agent reproduces the kubelet's producer–consumer architecture with
// public, replaceable parts: pod sources (package sources) merged into one
// stream of changes, a pod lifecycle event generator (pleg) that watches the
// runtime, a sync loop (syncloop) that turns both into work for its handler
// (synchandler), one goroutine per pod (podworker) running the per-pod sync
// (podsync), and a pod-level runtime manager (podruntime) on top of any
// CRI-shaped runtime. Take the defaults and replace the one part you need.
//
// The root package only assembles: Options, New, one wiring function
// (wire, in wiring.go) that builds the default parts in dependency order,
// and Run, which runs the long-running parts from one list (a run.Group:
// started in order, stopped in reverse). Every part is a package of its
// own; read wiring.go to see which, and how they connect.
//
// # Usage
//
//	rt := runtimetest.New(runtimetest.Options{})
//	src, _ := file.New(file.Options{Path: "/etc/nodekit/manifests"}) // the agent names the node
//	agent, err := nodekit.New(nodekit.Options{
//		NodeName: "edge-1",
//		Sources:  []nodekit.NamedSource{{Name: sources.FileSource, Source: src}},
//		Runtime:  rt,
//		Logger:   logger,
//	})
//	if err != nil { ... }
//	err = agent.Run(ctx) // until ctx ends
//
// # Assembling by hand
//
// The parts are exported, each over small interfaces of what it calls;
// an agent without the root package is a few dozen lines (the package's
// Example_handAssembled runs one):
//
//	config := sources.NewConfig(sources.ConfigOptions{})
//	config.Add("file", src)
//	statuses := status.NewManager(status.Options{})
//	probes, _ := probe.NewManager(statuses.GetPodStatus, probe.Options{Runtime: rt})
//	volumes, _ := volume.NewManager(dir, volume.Options{})
//	cgroups, _ := cgroup.NewPodManager(cgroup.PodManagerOptions{})
//	rm, _ := podruntime.New(rt, rt, podruntime.Options{})
//	cache, queue := pleg.NewCache(), podworker.NewQueue()
//	events, _ := pleg.NewGeneric(rt, rm, cache, pleg.GenericOptions{})
//	syncer, _ := podsync.New(podsync.Config{Runtime: rm, Volumes: volumes, Cgroups: cgroups,
//		Probes: probes, Statuses: statuses, Cache: cache, Queue: queue})
//	workers, _ := podworker.New(mySync{syncer}, podworker.Options{Cache: cache, Queue: queue})
//	handler, _ := synchandler.New(synchandler.Config{Pods: podmanager.New(), Workers: workers,
//		Statuses: statuses, Volumes: volumes, Probes: probes, Cgroups: cgroups, Runtime: rm, Cache: cache})
//	loop, _ := syncloop.New(handler, syncloop.Config{Updates: config.Updates(), PLEG: events.Events(),
//		Liveness: probes.Liveness(), Readiness: probes.Readiness(), Startup: probes.Startup(),
//		Pods: handler.Pods(), Work: queue, SourcesReady: config.SourcesReady})
//	var g run.Group
//	g.Add("pleg", events)
//	g.Add("volume manager", volumes)
//	g.Add("probes", probes)
//	g.Add("status manager", statuses)
//	g.Add("pod workers", workers)
//	g.Add("sources", config)
//	g.Add("sync loop", loop)
//	err := g.Run(ctx)
//
// # Admission
//
// Each new pod passes the kubelet's admission checks (package admission),
// in the kubelet's order: resources no node can honour, sysctls (the safe
// set for the kernel plus Options.AllowedUnsafeSysctls), OS, pod count
// (Options.Node.MaxPods), resources counted over the admitted pods, node
// affinity and selector, spec.nodeName, host ports, NoExecute taints,
// AppArmor and the pod's RuntimeClass (it must exist: the API server's,
// watched by an informer, or Options.RuntimeClasses; its sandbox then
// runs with the class's handler, its overhead counted from spec.overhead
// as the API server set it); then Options.Admit. The Node they check against is the
// registered one, or, for a standalone agent, one made of its name,
// Options.Node.Labels and Taints, and Options.Node.Capacity. A rejected pod
// never reaches the runtime: its phase is Failed with the check's reason,
// and a Warning event carries the message. At container creation, a
// runAsNonRoot container whose image runs as root fails with
// CreateContainerConfigError.
//
// # Idle cost
//
// Differences from the kubelet, on purpose: an agent whose pods run and do
// not change does no periodic work per pod beyond what the runtime's
// observation needs (the relisting PLEG's lists, or nothing with the
// evented one), so that a node of thousands of pods idles at a fraction
// of a core.
//   - A periodic sync (every minute, as the kubelet's) of a pod whose last
//     sync found nothing to do is skipped while its pod object, runtime
//     status, API status, probe results and host IPs are the same
//     (podsync.Syncer.SyncPod); every pod is still synced in full within 10
//     minutes, each at a time of its own. Pods with an active deadline or
//     a pending resize are always synced in full.
//   - Housekeeping (every 2 s) runs in full only when the pods, the
//     workers' terminations or the runtime's pods changed, after a failed
//     pass, and once a minute (synchandler.Handler.HandlePodCleanups).
//   - Housekeeping and the log rotator read the runtime's pods and running
//     containers from the PLEG's cache (a PLEG of package pleg) instead of
//     listing the runtime; the relist does not read again a pod whose
//     cached status shows what it lists.
//   - The log rotator (every 10 s) reads the size of the logs written
//     since its last pass only, watched with one-shot inotify watches,
//     rather than a stat of every running container's log (the floor of
//     the kubelet's way, 0.7 % of a core at 10,000 pods on a small VM);
//     every log is checked every 5 minutes whatever the watches say
//     (package logrotate).
//   - The container garbage collector (every minute) does not list the
//     runtime when the pods, the workers' terminations and the runtime's
//     pods are as its last collection, which removed nothing, saw them;
//     it lists every 10 minutes whatever the counts (package gc).
//
// # Concurrency
//
// An Agent runs once: Run blocks until its context ends and returns after
// every goroutine it started has exited; its parts stop in the reverse of
// the order they started, the sync loop first. Its query methods (PodStatus, Pods,
// Healthy) are safe to call from any goroutine. Several agents can run side
// by side in one process: nodekit has no package-level state.
//
// The pods and statuses the agent hands out (to a wrapped handler or pod
// syncer, to OnPodStatus, from PodStatus and Pods) are shared between its
// parts, and some of their maps, slices and pointers between pods, to
// keep a pod's cost in kilobytes: treat them as read-only, and DeepCopy
// one before changing it.
//
// # Errors
//
// Bad input never stops the agent: a bad manifest, a pod the agent rejects,
// a runtime that fails, each is logged (and, for pods, shown in their status)
// and the agent goes on with everything else. Run returns an error only when
// a part fails in a way the agent cannot continue from.
package nodekit
