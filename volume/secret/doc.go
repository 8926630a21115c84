// Package secret is the secret volume plugin: the keys of a Secret of the
// pod's namespace as files, on a tmpfs, kept up to date when the Secret
// changes.
//
// # Usage
//
//	sp, err := secret.NewForClient(client, secret.Options{Logger: log})
//	...
//	vm, err := volume.NewManager(rootDir, volume.Options{
//		Plugins: []volume.Plugin{sp, ...},
//	})
//
// New takes a Getter instead of a client: a cache, an informer's lister,
// or a fake in tests.
//
// # Content
//
// As the kubelet: without items, one file per key of data, named after
// the key; with items, each item's key at its path; files have the item's
// mode, else defaultMode, else 0644, whatever the umask. With the pod's
// fsGroup, files and directories belong to that group and are
// group-readable. A missing optional Secret gives an empty volume, and an
// item whose key is missing is skipped when the volume is optional;
// otherwise both are errors naming the Secret, retried by the volume
// manager until it appears. The volume is mounted read-only.
//
// # tmpfs
//
// Each volume's directory,
// <root>/pods/<uid>/volumes/kubernetes.io~secret/<name>, is a tmpfs of its
// own (sized by the pod's memory limit, as the kubelet's), so that secrets
// never reach the disk; TearDown unmounts it. Mounting needs root
// (CAP_SYS_ADMIN): an agent that is not root, or is denied the mount, or
// sets Options.NoTmpfs, keeps the volumes in plain directories and logs a
// warning once.
//
// # Updates
//
// SetUp is idempotent and writes through the atomic writer: the files are
// symlinks through <dir>/..data to a timestamped directory, and a change
// writes a new directory and swaps ..data with one rename, so a container
// sees the old set of files or the new one, never a mix or a half-written
// file. An unchanged Secret writes nothing. The plugin implements
// RequiresRefresh(vol) bool: a volume manager that calls SetUp again for
// such plugins' volumes (the kubelet does on every pod sync) keeps the
// files up to date. Containers that mount the volume with a subPath do not
// see updates (as with the kubelet).
//
// # Errors
//
// Errors start with "secret: volume <name>: ". A spec the plugin cannot
// serve (an item path with "..", an absolute one, a mode above 0777) is
// volume.ErrInvalid. When getting the Secret fails for a reason that may
// pass (the API server unreachable) and the volume already has content,
// SetUp keeps that content and succeeds, logging the error; the kubelet
// fails instead.
package secret
