// Package hostpath is the hostPath volume plugin: it lets a pod's
// containers bind a file or directory of the host, after checking it as the
// kubelet does and against the paths the agent allows.
//
// # Usage
//
//	hp, err := hostpath.New(hostpath.Options{
//		AllowedHostPaths: []hostpath.AllowedHostPath{
//			{PathPrefix: "/srv/data"},
//			{PathPrefix: "/etc/ssl/certs", ReadOnly: true},
//		},
//	})
//	...
//	vm, err := volume.NewManager(rootDir, volume.Options{Plugins: []volume.Plugin{hp, emptydir.New(emptydir.Options{})}})
//
// # Types
//
// The volume's type is checked on the host as the kubelet checks it: ""
// (no check; the runtime creates a missing path as a directory),
// DirectoryOrCreate (a missing directory is created with mode 0755, and its
// missing parents too), Directory, FileOrCreate (a missing file is created
// empty with mode 0644; its parent must exist, as in the kubelet), File,
// Socket, CharDevice and BlockDevice. A failed check is retried by the
// volume manager: the path may appear.
//
// # Host access
//
// Binding host paths into containers is the most dangerous thing an agent
// does, so:
//
//   - Options.AllowedHostPaths restricts the paths. nil allows every path,
//     the kubelet's behaviour (and what the examples and tests need); a
//     non-nil list allows only what is below its prefixes, and an empty
//     non-nil list none. Prefixes match whole path components: /data allows
//     /data and /data/x, never /database. A path outside gets an error
//     naming the path and the allowed prefixes.
//   - A path with a ".." component is refused (the kubelet's and the API's
//     rule), so /srv/../etc never passes for a path below /srv.
//   - Every symlink in the path is followed (dangling ones too, which a
//     mkdir would follow) and the resulting physical path is checked again.
//     A link from /srv/link to /etc is refused when only /srv is allowed.
//   - A prefix marked ReadOnly allows its paths only when every container
//     of the pod mounts the volume read-only (the PodSecurityPolicy rule:
//     a writable mount is refused with a clear error rather than silently
//     made read-only), and the Mount is read-only, so every mount of it is.
//     Another entry that allows the path writable wins. Nothing is created
//     below a read-only prefix.
//   - Missing directories and files are created with mkdirat and openat
//     without following symlinks.
//   - The checked physical path is then opened without following any
//     symlink (openat2 with RESOLVE_NO_SYMLINKS, or a walk of
//     openat(O_PATH|O_NOFOLLOW) on older kernels); the opened file's type
//     and its place (/proc/self/fd) are checked once more, and that very
//     inode is bind-mounted (with what is mounted below it, as the runtime's
//     rbind would) on the volume's directory under the pod's directory,
//     <root>/pods/<uid>/volumes/kubernetes.io~host-path/<name>. The Mount
//     names that directory, so the runtime binds what was checked: a
//     directory of the path swapped for a symlink at any moment makes the
//     set-up fail and be retried, never mount something else. TearDown
//     unmounts it; the host path itself is never deleted.
//
// This differs from the kubelet, which hands the runtime the path string
// (the swap race of the issue this closes); the cost is one bind mount per
// hostPath volume, and CAP_SYS_ADMIN in the agent's mount namespace, which
// must be the runtime's (it already must be, for subPaths). A path of type
// "" that does not exist is created as a directory by the plugin rather
// than by the runtime (the same result), and not at all below a read-only
// prefix. Options.NoBind returns to handing over the resolved path, for
// agents that cannot mount (fake runtimes, tests): the swap race is then
// open again, so allow only paths that untrusted parties cannot write to.
//
// Mount propagation (HostToContainer, Bidirectional) works through the
// bind as through the path itself: a bind of a shared mount joins its peer
// group.
//
// # Errors
//
// Errors start with "hostpath: volume <name>: ". Spec mistakes wrap
// volume.ErrInvalid and allow-list refusals volume.ErrNotAllowed; the
// volume manager does not wait for those to clear.
package hostpath
