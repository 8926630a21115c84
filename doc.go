// Package nodekit assembles a Kubernetes node agent from parts: a kubelet
// you build yourself.
//
// An Agent reproduces the kubelet's producer–consumer architecture with
// public, replaceable parts: pod sources (package sources) merged into one
// stream of changes, a pod lifecycle event generator (pleg) that watches the
// runtime, a sync loop (syncloop) that turns both into work, one goroutine per
// pod (podworker), and a pod-level runtime manager (runtime) on top of any
// CRI-shaped runtime. Take the defaults and replace the one part you need.
//
// # Usage
//
//	rt := runtimetest.New(runtimetest.Options{})
//	src, _ := file.New(file.Options{Path: "/etc/nodekit/manifests", NodeName: "edge-1"})
//	agent, err := nodekit.New(nodekit.Options{
//		NodeName: "edge-1",
//		Sources:  []nodekit.NamedSource{{Name: sources.FileSource, Source: src}},
//		Runtime:  rt,
//		Logger:   logger,
//	})
//	if err != nil { ... }
//	err = agent.Run(ctx) // until ctx ends
//
// # Concurrency
//
// An Agent runs once: Run blocks until its context ends and returns after
// every goroutine it started has exited. Its query methods (PodStatus, Pods,
// Healthy) are safe to call from any goroutine. Several agents can run side
// by side in one process: nodekit has no package-level state.
//
// # Errors
//
// Bad input never stops the agent: a bad manifest, a pod the agent rejects,
// a runtime that fails, each is logged (and, for pods, shown in their status)
// and the agent goes on with everything else. Run returns an error only when
// a part fails in a way the agent cannot continue from.
package nodekit
