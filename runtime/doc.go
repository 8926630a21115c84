// Package runtime holds the container runtime as nodekit sees it: the
// CRI-shaped RuntimeService and ImageService interfaces and their optional
// capabilities, the runtime's view of pods (Pod, PodStatus,
// ContainerStatus) built from CRI answers, the labels that tie sandboxes
// and containers to their pods, the error classes of a runtime's calls,
// and the scoping of a runtime to one agent (WithIdentity). It knows
// nothing of statuses, probes or volumes: the pod-level runtime manager,
// which turns a v1.Pod into sandbox and container operations, is package
// podruntime.
//
// # Usage
//
// Any implementation of RuntimeService and ImageService works: the CRI gRPC
// client in runtime/cri, the in-memory runtime in runtime/runtimetest, the
// runtimes of runtime/backend and runtime/process, or k8s.io/cri-api's own
// fakes (the interfaces here are a subset of cri-api's RuntimeService and
// ImageManagerService, with identical method signatures). Optional
// capabilities are discovered with a type assertion:
// ContainerEventStreamer (CRI GetContainerEvents, for the evented PLEG) and
// WireLister (the list answers in their protobuf encoding, for the
// relisting PLEG, which reads a few fields of each item from the bytes).
// Package runtime/runtimesuite checks an implementation against the rules
// the other parts rely on.
//
//	rt := runtimetest.New(runtimetest.Options{})
//	var rs runtime.RuntimeService = rt
//	scoped := runtime.WithIdentity(rs, "node-a")
//	sandboxes, err := scoped.ListPodSandbox(ctx, nil)
//
// # The runtime's view of pods
//
// PodsFromCRI groups listed sandboxes and containers into Pods by their
// LabelPodUID; a PodStatus is built with AddSandboxStatus and
// AddContainerStatus from the runtime's status answers (package
// podruntime reads them, a container event carries them), which keep the
// sandboxes and containers newest first, the one order every reader
// relies on. PodSandboxChanged, ShouldContainerBeRestarted,
// HasAnyActiveRegularContainerStarted, HasAnyRegularContainerCreated,
// ContainerResized and PodCgroupResized are the decisions of a pod sync
// that the API status shows too: package podruntime acts on them,
// package status reports them.
//
// A PodStatus keeps a compact copy of each sandbox's status (ID, metadata,
// state, creation time, network, namespace options, runtime handler),
// where the kubelet's keeps the runtime's answer whole: the PLEG's cache
// holds one for every pod, and the sandbox's labels and annotations maps
// would weigh more than the rest of it. That copy is two allocations (its
// messages, its strings), and a ContainerStatus's own strings share one,
// where the runtime's answer is a dozen small objects: each small object
// left from the start of a burst of pods can keep a page of the heap from
// being reused. Strings are not copied twice into one pod's status (the
// sandbox's name, namespace and UID are the pod's, a container's sandbox
// ID is its sandbox's), and container names, images, image references and
// spec hashes, which most pods repeat, are shared between pods (package
// unique).
//
// # Agents sharing a runtime
//
// WithIdentity scopes a RuntimeService to one agent: what it creates
// carries the label LabelAgent, and its lists and event stream show only
// objects with that label. The agent (package nodekit) scopes its runtime
// with its NodeName, so that agents of different names on one runtime
// (hollow nodes, two agents on a shared containerd) never stop or remove
// each other's pods, where the kubelet, which owns its runtime, removes
// every pod it does not know.
//
// # Concurrency
//
// Implementations of RuntimeService and ImageService must be safe for
// concurrent use. The functions of this package are pure; a PodStatus is
// built by one goroutine and read-only once shared.
//
// # Errors
//
// IsNotFound recognises the runtime's "no such object" errors (ErrNotFound,
// gRPC NotFound); IsUnimplemented, IsUnavailable and IsDeadlineExceeded the
// other classes of a runtime's failures, wrapped or as a gRPC status.
package runtime
