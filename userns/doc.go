// Package userns gives pods with hostUsers: false their own user
// namespace: a range of host user and group IDs per pod, the kubelet's
// user namespace manager (UserNamespacesSupport, on by default since
// Kubernetes 1.33).
//
// # Usage
//
//	m, err := userns.New(userns.Options{RootDir: "/var/lib/nodekit", Runtime: rt})
//	...
//	go m.Run(ctx) // releases the ranges of removed pods
//	ns, err := m.PodUserNamespace(ctx, pod, runtimeHandler)
//	// ns goes into the CRI NamespaceOption.UsernsOptions of the pod's
//	// sandbox and of each of its containers.
//
// # Rules (the kubelet's)
//
// The node's ID range is the "kubelet" user's subordinate IDs, the same
// single range in /etc/subuid and /etc/subgid as the getsubids tool
// reports, or, without such a user or without getsubids, every ID from
// IDsPerPod up (65536 to 2^32-1 by default). The range must start at a
// multiple of IDsPerPod, not below it, hold a whole number of pods and at
// least MaxPods of them. Each pod gets IDsPerPod IDs (65536 by default,
// a multiple of 65536): container IDs 0 to IDsPerPod-1, users and groups
// alike, in a free block picked at random. The mapping is written to
// <RootDir>/pods/<uid>/userns in the kubelet's JSON format
// ({"uidMappings":[{"hostId":…,"containerId":0,"length":…}],"gidMappings":[…]}),
// read back for each container and after a restart, and released once the
// pod's directory is removed (Run checks every CleanupPeriod, as the
// kubelet's housekeeping). A pod without hostUsers: false gets the node's
// namespace (mode NODE).
//
// A hostUsers: false pod fails, with the kubelet's messages, when its
// runtime handler does not report the UserNamespaces feature in CRI
// Status ("can't set `spec.hostUsers: false`, runtime does not support
// user namespaces", or "RuntimeClass handler %q does not support …"),
// when the range is used up ("could not find an empty slot to allocate a
// user namespace"), when its mapping file is invalid, and, as the API
// server's validation does (with its message "when `hostUsers` is
// false"), with hostNetwork, hostPID, hostIPC or a container's
// volumeDevices.
//
// # Differences from the kubelet, on purpose
//
//   - No block that reaches ID 2^32-1 (or wraps past 2^32 with a
//     subordinate range that overflows) is handed out: the kernel refuses
//     such a mapping, and the kubelet's pod that draws the last block of
//     the default range never gets a sandbox (kubernetes issue 139916).
//     The default range holds 65534 pods instead of 65535.
//   - A mapping file that cannot be read back at start (corrupt JSON,
//     another length or offset, a range taken twice) is logged and only
//     that pod's sandbox fails, with the error; a valid mapping outside
//     the node's current range stays the pod's. The kubelet refuses to
//     start in both cases, stopping every pod of the node.
//   - A range or subordinate-ID lookup that fails is logged and tried
//     again at each CleanupPeriod; meanwhile only hostUsers: false pods
//     fail. The kubelet refuses to start.
//   - With a "kubelet" user but no getsubids, the default range is used;
//     the kubelet means to, but stops with an error (it tests the lookup
//     error with os.IsNotExist).
//   - The runtime handlers' features are asked from the runtime (CRI
//     Status) at each sandbox and container of a hostUsers: false pod,
//     not read from the last periodic status.
//   - The kubelet's warning for kernels older than 6.3 is not logged.
//
// # Concurrency
//
// A Manager is safe for concurrent use. Run returns when its context
// ends.
//
// # Errors
//
// Errors belong to ErrNotSupported, ErrExhausted, ErrHostNamespaces,
// ErrVolumeDevices,
// ErrBadMappings or ErrRange (errors.Is); their messages are the
// kubelet's.
package userns
