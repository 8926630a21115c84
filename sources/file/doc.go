// Package file is the static pod source that reads pod manifests from a
// directory or a single file, the kubelet's file source (--pod-manifest-path).
//
// Each file holds one pod, YAML or JSON (kind Pod and apiVersion v1 when they
// are given); a PodList is rejected. A file of several YAML documents gives
// the pod of its first (empty documents aside), as the kubelet reads it;
// unlike the kubelet, which ignores them silently, each later document is
// reported as ignored.
// Dotfiles and subdirectories are skipped. Every pod gets
// sources.StaticPodDefaults with the file's path, so its UID changes with
// its content, and must pass sources.ValidateStatic (the API server's
// checks, which the kubelet also runs on static pods).
//
// # Usage
//
//	src, err := file.New(file.Options{Path: "/etc/kubernetes/manifests", NodeName: node, Logger: log})
//	if err != nil { ... }
//	cfg.Add(sources.FileSource, src)
//
// Given to an agent (nodekit.Options.Sources), the Source takes the
// agent's node name (sources.NodeNamer): leave NodeName empty; without a
// Logger of its own, it logs through the agent's (sources.LoggerSetter).
//
// # Watching
//
// Run watches the path with fsnotify (a directory directly; a file, or a
// path that does not exist yet, through its parent) and lists it again after
// each burst of events (gathered for 100ms) and every Period. A failed watch
// is logged and set up again with a back-off from 1s to 20s; the periodic
// list goes on meanwhile. Each list sends a full snapshot when it differs
// from the last one sent; the first is always sent, even empty, also when the
// path does not exist.
//
// # Reading
//
// A manifest is opened with O_NONBLOCK, and the opened file (fstat, not
// the path) must be a regular file outside the kernel's own file systems
// (proc, sysfs, debugfs, ...); it is read through its descriptor, at most
// MaxFileBytes, and a read that would block fails at once. Anything else (a
// FIFO, a device, a symlink to /proc/kmsg, a file swapped for a FIFO after
// the listing) is skipped with an error naming the file. Each read also has
// a deadline, Options.ReadTimeout (10s), for file systems that hang: the
// file is then skipped with an error, and not read again until the stuck
// read returns; the kernel cannot interrupt such a read, so its goroutine
// outlives Run in that case alone. The kubelet opens and reads the path
// with a plain read, and freezes on such files.
//
// # Errors
//
// Bad input never loses a pod. A file that cannot be read, decoded or
// validated is logged with its path and the reason, once per distinct
// content; if it gave a good pod before, that pod stays in the snapshots
// until the file is deleted or becomes valid again. A file that was never
// valid contributes nothing. When the path itself cannot be read (other
// than not existing), the previous snapshot stands.
//
// # Concurrency
//
// Run starts one goroutine (the watch) besides its own and returns after it
// exited. Run must not be called concurrently with itself. The pods sent
// are not modified afterwards.
package file
