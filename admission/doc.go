// Package admission decides whether a node agent may run a pod, before
// the pod reaches the runtime: the kubelet's admit handlers, each a small
// Handler with the kubelet's reasons and messages.
//
// A rejected pod never runs: the agent sets its phase to Failed with the
// Result's Reason and "Pod was rejected: " + Message, and records a
// Warning event with the same reason.
//
// # Usage
//
// Build a chain, in the kubelet's order, and pass it as the agent's
// admission (nodekit.Options.Admit adds handlers after the defaults):
//
//	sysctls, err := admission.Sysctls(admission.SysctlOptions{AllowedUnsafe: []string{"kernel.msg*"}})
//	...
//	node := func() *v1.Node { return myNode }
//	h := admission.Chain(
//		admission.InvalidResources(),
//		sysctls,
//		admission.OS(),
//		admission.SupplementalGroupsPolicy(node),
//		admission.PodCount(110),
//		admission.ResourceFit(node),
//		admission.NodeAffinity(node),
//		admission.NodeName(node),
//		admission.NodePorts(),
//		admission.Taints(node),
//		admission.AppArmor(admission.AppArmorOptions{}),
//	)
//	r := h.Admit(pod, activePods)
//	if !r.Admit { reject(pod, r.Reason, r.Message) }
//
// # The checks
//
//   - InvalidResources: negative or absurd requests and limits, limits
//     below requests (InvalidResources).
//   - Sysctls: the safe set for the kernel's version plus the allowed
//     unsafe ones; namespaced sysctls of a namespace shared with the host
//     (hostNetwork, hostIPC) are refused (SysctlForbidden).
//   - OS: the pod's kubernetes.io/os label
//     (PodOSSelectorNodeLabelDoesNotMatch) and spec.os.name
//     (PodOSNotSupported) against GOOS.
//   - SupplementalGroupsPolicy: a pod asking for the Strict policy on a
//     node whose status.features do not support it
//     (SupplementalGroupsPolicyNotSupported). The agent gives it the
//     runtime's features when the Node has none.
//   - PodCount (OutOfpods) and ResourceFit (OutOfcpu, OutOfmemory,
//     OutOfephemeral-storage, OutOf<extended resource>): the pod's
//     requests against the node's allocatable resources less those of the
//     pods already admitted.
//   - NodeAffinity, NodeName, NodePorts, Taints (NoExecute only): the
//     scheduler predicates the kubelet runs again.
//   - AppArmor: the host enforces AppArmor and each Localhost profile is
//     named and loaded (AppArmor).
//   - RuntimeClass: the pod's RuntimeClass exists and, with
//     RuntimeClassOptions.Handlers, names a handler the runtime offers
//     (RuntimeClass). The agent runs it with its RuntimeClasses (the API
//     server's, or Options.RuntimeClasses), without Handlers: a handler
//     the runtime does not know fails the sandbox, as with the kubelet. NoNewPrivs: for runtimes that cannot
//     set no_new_privs (NoNewPrivs).
//
// The checks that need the Node take a NodeFunc, so that a standalone
// agent passes a Node of its own making (its labels, taints and capacity)
// and a joined one the Node object it keeps.
//
// # Differences from the kubelet
//
//   - InvalidResources and RuntimeClass are nodekit's: the API server
//     validates resources and RuntimeClasses before a kubelet sees a pod,
//     but static pods skip it, and the kubelet fails the sandbox of a pod
//     with an unknown class at every retry instead of once.
//   - AppArmor also requires Localhost profiles to be loaded, as kubelets
//     before v1.30 did.
//   - No eviction (memory, disk pressure), topology, CPU, memory or device
//     manager handlers, no critical-pod preemption: nodekit has none of
//     those managers. The kubelet's re-read of the Node when node
//     affinity alone fails is left to the NodeFunc, which is read at each
//     admission.
//   - NoNewPrivs is not among the defaults: the kubelet v1.37 admits such
//     pods on every CRI runtime.
//
// # Concurrency
//
// The handlers are safe for concurrent use as long as their NodeFunc and
// option functions are. Only ResourceFit keeps state between calls: the
// requests of the active pods, by pod object, so that an admission beside
// n pods costs n look-ups rather than n request computations (a pod
// object must not change once passed; an update brings a new one).
//
// # Errors
//
// Only Sysctls' constructor fails (an allowed sysctl that is not a valid
// pattern or not namespaced); errors start with "admission: ". A check
// never returns an error: what it cannot decide it rejects with a clear
// message, or admits when the information is absent (a nil Node).
package admission
