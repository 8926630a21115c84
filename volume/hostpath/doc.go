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
//	vm, err := volume.NewManager(volume.Options{Plugins: []volume.Plugin{hp, emptydir.New(emptydir.Options{})}})
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
//     mkdir would follow) and the resulting physical path is checked again;
//     that path is what the volume's Mount names, so the runtime binds what
//     was checked. A link from /srv/link to /etc is refused when only /srv
//     is allowed.
//   - A prefix marked ReadOnly allows its paths only when every container
//     of the pod mounts the volume read-only (the PodSecurityPolicy rule:
//     a writable mount is refused with a clear error rather than silently
//     made read-only), and the Mount is read-only, so every mount of it is.
//     Another entry that allows the path writable wins. Nothing is created
//     below a read-only prefix.
//   - Missing directories and files are created with mkdirat and openat
//     without following symlinks.
//
// What it cannot do: stop a swap of a directory of the path for a symlink
// by someone who can write below an allowed prefix, between the check and
// the runtime's bind mount. Allow only paths that untrusted parties cannot
// write to, and prefer read-only entries. (SubPaths inside a volume, which
// containers can write to, are bind-mounted by the volume manager from a
// descriptor opened without following symlinks, so they are immune.)
//
// # Errors
//
// Errors start with "hostpath: volume <name>: ". Spec mistakes wrap
// volume.ErrInvalid and allow-list refusals volume.ErrNotAllowed; the
// volume manager does not wait for those to clear.
package hostpath
