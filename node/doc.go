// Package node registers the agent's Node in the API server, keeps the
// Node's status and renews its Lease: the kubelet's node registration,
// node status loop and node lease.
//
// Run first registers the Node: it creates it with the labels of Options
// (plus kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch),
// the annotation nodekit.io/version (nodekit's module version), the taints
// of Options, and a status holding the machine's capacity (cpu, memory,
// pods, ephemeral-storage if asked, hugepages-<size> for every page size
// the kernel supports: ReadHugePages), the allocatable resources, the
// addresses (InternalIP, Hostname), the nodeInfo (kubeletVersion: the
// Kubernetes version nodekit follows, v1.37.2 for k8s.io/api v0.37.2, with
// nodekit's version as build metadata, v1.37.2+nodekit.v0.1.0: a semantic
// version that compares as v1.37.2, as the control plane's version skew
// checks expect; see package version), status.images and the
// conditions. A Node that already exists is adopted: the labels and the
// annotation it lacks are PATCHed on, and its status is reported at once.
//
// Allocatable is the kubelet's formula (Allocatable): capacity less
// SystemReserved, KubeReserved, Reserved and what the hard eviction
// thresholds hold back (HardEvictionReserved: eviction.HardReservation),
// floored at zero. status.images are the 50 largest images of
// Options.Images, with at most 5 names each (digests first), as the
// kubelet's. status.runtimeHandlers are the handlers of the runtime's CRI
// Status response (Options.RuntimeHandlers), each with its name and its
// recursiveReadOnlyMounts and userNamespaces features, as the kubelet's
// RuntimeHandlers setter reports them; the scheduler places a hostUsers:
// false pod only on a Node whose handlers support user namespaces.
// status.features is the runtime's features of its Status response
// (Options.RuntimeFeatures), as the kubelet's NodeFeatures setter:
// supplementalGroupsPolicy true when the runtime supports the Strict
// policy (containerd 2.x), the field left alone when the runtime reports
// no features (containerd 1.6).
// MemoryPressure, DiskPressure and PIDPressure are True while
// Options.Pressure (the eviction manager) reports them, with the
// kubelet's reasons.
//
// With Options.Recorder the controller records the kubelet's node events
// (Normal, on the Node): Starting when Run starts, then one per owned
// condition at registration and at every change: NodeReady,
// NodeNotReady, NodeHasSufficientMemory, NodeHasInsufficientMemory,
// NodeHasNoDiskPressure, NodeHasDiskPressure, NodeHasSufficientPID,
// NodeHasInsufficientPID ("Node n1 status is now: NodeReady").
//
// Then two loops run until the context ends:
//
//   - the status loop reads the Node every StatusUpdateFrequency (10 s),
//     computes its status (Ready from Options.Health; MemoryPressure,
//     DiskPressure and PIDPressure from Options.Pressure) and PATCHes it (a strategic merge
//     patch of the status subresource, with the Node's UID as a
//     precondition; never a PUT) when it changed, or when
//     StatusReportFrequency (5 min) passed since the last report, as the
//     kubelet does. Conditions and resources it does not own are kept. A
//     Node found deleted is registered again.
//   - the Lease loop renews the Lease named after the node in
//     kube-node-lease every LeaseRenewInterval (10 s, up to 4 % later),
//     with a duration of LeaseDuration (40 s) and the Node as its owner
//     (the Lease is created once the Node is registered). The Lease is the
//     node's heartbeat; once Run returned it is no longer renewed and
//     expires. It has the semantics of component-helpers' lease controller,
//     which the kubelet uses: it updates the Lease it last wrote without
//     reading it, reads it again (creating it when missing, backing off
//     0.2 s doubling to 7 s) after a failed update or a conflict, tries an
//     update up to 5 times per interval and calls
//     OnRepeatedHeartbeatFailure after each failed try but the first.
//     nodekit has its own loop because that controller takes client-go's
//     full clientset, whose scheme of every API group costs the agent
//     about 10 MiB (see package kubeclient).
//
// # Usage
//
//	ctl, err := node.New(client, name, node.Options{
//		Labels:         map[string]string{"node-role.example.com/edge": ""},
//		Health:         agent.Healthy,
//		RuntimeVersion: runtimeVersion,
//		Logger:         log,
//	})
//	if err != nil { ... }
//	go ctl.Run(ctx)
//	...
//	if n, ok := ctl.Node(); ok { /* n.UID for owner references */ }
//
// # Errors
//
// Run returns an error only when the machine cannot be read
// (/proc/meminfo, or the size of EphemeralStoragePath). API errors never
// stop it: registration is retried with back-off (0.1 s doubling to 7 s),
// a failed status update is logged and retried on the next tick, and the
// Lease loop backs off (up to 7 s) on its own.
//
// # Concurrency
//
// Run starts two goroutines and returns after both exited; it must not be
// called concurrently with itself. Node may be called at any time. Health
// and RuntimeVersion are called from the status loop's goroutine.
package node
