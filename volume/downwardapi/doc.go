// Package downwardapi is the downwardAPI volume plugin: fields of the pod
// and resources of its containers as files, kept up to date when the pod
// changes.
//
// # Usage
//
//	da := downwardapi.New(downwardapi.Options{
//		NodeAllocatable: func() v1.ResourceList { return allocatable },
//		Logger:          log,
//	})
//	vm, err := volume.NewManager(rootDir, volume.Options{
//		Plugins: []volume.Plugin{da, ...},
//	})
//
// # Content
//
// Each item's path holds, as the kubelet writes it:
//
//   - fieldRef metadata.name, metadata.namespace, metadata.uid;
//   - fieldRef metadata.labels or metadata.annotations: one key="value"
//     line per entry, the value Go-quoted, sorted by key, without a final
//     newline; metadata.labels['key'] or metadata.annotations['key']: the
//     raw value, empty when absent;
//   - resourceFieldRef of a named container (app or init): limits.cpu,
//     limits.memory, limits.ephemeral-storage, limits.hugepages-<size> or
//     the same requests, divided by the divisor (default 1) and rounded up;
//     a cpu, memory or ephemeral-storage limit the container lacks is the
//     node's allocatable amount (Options.NodeAllocatable).
//
// Beyond what the API server accepts in a volume, for pods that do not go
// through it (static pods): spec.nodeName, spec.serviceAccountName,
// status.podIP(s) and status.hostIP(s), empty until the pod's status has
// them (the first set-up happens before the pod's sandbox exists; a
// refresh writes them). Any other field is volume.ErrInvalid.
//
// Files have the item's mode, else defaultMode, else 0644; with the pod's
// fsGroup they belong to that group and are group-readable. The volume's
// directory, <root>/pods/<uid>/volumes/kubernetes.io~downward-api/<name>,
// is a tmpfs of its own as in the kubelet (a plain directory, logged once,
// when the agent cannot mount or Options.NoTmpfs is set), mounted
// read-only.
//
// # Updates
//
// SetUp is idempotent and writes through the atomic writer (see package
// configmap): a container sees the old files or the new ones, never a mix.
// The plugin implements RequiresRefresh(vol) bool: a volume manager that
// calls SetUp again, with the pod's latest version, for such plugins'
// volumes (the kubelet does on every pod sync) keeps labels and
// annotations up to date.
//
// # Errors
//
// Errors start with "downwardapi: volume <name>: ". An unsupported field or
// resource, a missing container, a bad path or mode is volume.ErrInvalid.
package downwardapi
