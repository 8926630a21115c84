// Package configmap is the configMap volume plugin: the keys of a
// ConfigMap of the pod's namespace as files, kept up to date when the
// ConfigMap changes.
//
// # Usage
//
//	cm, err := configmap.NewForClient(client, configmap.Options{Logger: log})
//	...
//	vm, err := volume.NewManager(rootDir, volume.Options{
//		Plugins: []volume.Plugin{cm, ...},
//	})
//
// New takes a Getter instead of a client: a cache, an informer's lister,
// or a fake in tests.
//
// # Content
//
// As the kubelet: without items, one file per key of data and binaryData,
// named after the key; with items, each item's key at its path (which may
// have directories); files have the item's mode, else defaultMode, else
// 0644, whatever the umask. With the pod's fsGroup, files and directories
// belong to that group and are group-readable. A missing optional
// ConfigMap gives an empty volume, and an item whose key is missing is
// skipped when the volume is optional; otherwise both are errors naming
// the ConfigMap, retried by the volume manager until the ConfigMap
// appears. The volume lives on disk, in
// <root>/pods/<uid>/volumes/kubernetes.io~configmap/<name>, and is mounted
// read-only.
//
// # Updates
//
// SetUp is idempotent and writes through the atomic writer: the files are
// symlinks through <dir>/..data to a timestamped directory, and a change
// writes a new directory and swaps ..data with one rename, so a container
// sees the old set of files or the new one, never a mix or a half-written
// file. An unchanged ConfigMap writes nothing. The plugin implements
// RequiresRefresh(vol) bool: a volume manager that calls SetUp again for
// such plugins' volumes (the kubelet does on every pod sync) keeps the
// files up to date. Containers that mount the volume with a subPath do not
// see updates (as with the kubelet).
//
// # Errors
//
// Errors start with "configmap: volume <name>: ". A spec the plugin cannot
// serve (an item path with "..", an absolute one, a mode above 0777) is
// volume.ErrInvalid. When getting the ConfigMap fails for a reason that
// may pass (the API server unreachable) and the volume already has content,
// SetUp keeps that content and succeeds, logging the error; the kubelet
// fails instead.
package configmap
