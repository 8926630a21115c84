// Package process is a container runtime that runs each container as a
// plain host process: nodekit's embedded default, for machines without
// containerd. New returns it as a runtime.RuntimeService and
// runtime.ImageService (the runtime/backend adapter over Backend), so the
// whole agent pipeline — probes, restart back-off, status, logs — works on
// it.
//
// # Usage
//
//	func main() {
//		process.RunMonitor() // first: this binary is also the containers' monitor
//		rt, err := process.New(process.Options{Logger: log})
//		...
//		defer rt.Close()
//		agent, err := nodekit.New(nodekit.Options{Runtime: rt, ...})
//	}
//
// # What a container is
//
// The container's command and args run on the host, found through the PATH
// of its environment (containerd's default PATH when it sets none), with
// its environment and working directory, stdin from /dev/null, in a
// process group of its own. Its stdout and stderr go to the CRI log file
// (<pod logs dir>/<container>/<restart>.log) in containerd's format. It
// exits with its own exit code, or 128+N after signal N: 137 after
// SIGKILL, reason OOMKilled when its or its pod's memory cgroup recorded
// an OOM kill. StopContainer sends SIGTERM to the whole process group, then
// SIGKILL when the grace period is over; when the main process exits, what
// is left of its group is killed, as a container's processes end with its
// init. Exec (exec probes) runs the command the same way, as a host
// process with the container's environment and working directory. By
// default the image is not used: every image is present; a container must
// give its command (pods written for busybox, "sh -c ...", run as they
// are).
//
// # Images
//
// With Options.Images (an imagestore.Store, as root) each container runs
// in its image instead. The store imports images from its ImportDir (OCI
// image layouts and "docker save" tarballs on disk; nothing is fetched
// from a registry) when the agent pulls them, checks each layer against
// its digest and unpacks the flattened file system (whiteouts applied,
// with go-containerregistry) once per image ID; the containers share it
// read-only. The runtime's ImageService pulls, lists (with sizes) and
// removes the store's images, so that package gc's image collector works
// on it (give it the store's directory as ImageFsPath). A pull of an image
// no source holds fails as NotFound (the pod shows ErrImagePull), a
// corrupt layer fails the pull with the layer's digest.
//
// The monitor starts the container's init (this executable again) in new
// mount, PID, UTS and IPC namespaces: it mounts an overlay of the image
// with a writable layer in the container's directory, /proc, a small /dev
// (null, zero, full, random, urandom, tty, shm) and the container's mounts,
// sets the pod's host name, chroots into the root and execs the command,
// which is PID 1 of its PID namespace. An overlay is the writable layer
// because it costs no copy and vanishes with the container's mount
// namespace; where overlay cannot be mounted (a state directory on an
// overlay file system), the image is mounted read-only with no writable
// layer rather than copied for each container. The image's environment
// comes under the container's, its working directory is the default, and
// a container that gives no command runs the image's entrypoint and Cmd as
// containerd runs them. Exec
// joins the container's UTS, IPC and PID namespaces and its root (through
// /proc/PID/root), and resolves the command inside it. Each container has
// namespaces of its own (the pod's containers share the host name, not a
// PID or IPC namespace), and the network is the host's.
//
// Without root, Options.Images is refused with a clear error (chroot and
// namespaces need root); host commands remain the default.
//
// # Monitors: why processes outlive the agent
//
// Each container has a monitor process, like containerd's shim or
// conmon: it starts the process, copies its output to the log file,
// waits for it and writes its exit status to the container's directory
// (<StateDir>/containers/<ID>: spec.json, process.json, exit.json). The
// monitor is this program's own executable started again
// (Options.MonitorCommand; RunMonitor runs it), detached in a session of
// its own and adopted by init, so it outlives the agent: a restarted agent
// reads the directories, finds its running containers again with no
// restart, and reads the exit codes of those that ended meanwhile. One
// monitor per container, rather than one supervisor for all, keeps the
// design small (no protocol between agent and supervisor; the agent reads
// files) and the failure of a monitor confined to its container; a
// re-executed binary, rather than a separate one, keeps `go run` working.
// A monitor costs one small Go process (a few MB of memory).
//
// The agent learns of a monitor's exit through a pidfd registered with the
// Go runtime's poller, so a thousand running containers cost no thread
// each. PIDs are trusted only with their start time from /proc, so a
// reused PID is never signalled. If a monitor is killed, its process dies
// with it (the monitor's parent-death signal) and the container reports
// exit code 137 with a message saying the monitor ended; Remove kills what
// is left of the process group. No stray process is left after a pod is
// removed.
//
// # Root and isolation
//
// Without root, containers are processes of the agent's user with no
// namespaces and no cgroups; NewBackend logs a line saying so. As root,
// each container runs in a cgroup of its own below its pod's cgroup (the
// sandbox's cgroup parent, which the agent's cgroup.PodManager made):
// <pod cgroup>/<container ID>, as runc's cgroupfs driver names it. Its
// monitor makes that cgroup and joins it through the cgroup package before
// starting the process, so the process is born there, then leaves for the
// root cgroup, as containerd's shims live outside the pods' cgroups: the
// pod's limits apply to its processes, a monitor is never its pod's OOM
// victim, and the container's cgroup holds its processes alone, which is
// where the agent's /stats/summary and /metrics/resource read the
// container's CPU and memory (the kernel's own accounting, with the
// kubelet's working set, rather than figures summed over /proc). The
// monitor removes the cgroup, killing what is left in it, when the
// process ends; Remove does it for a monitor that could not. Without
// Options.Images no namespaces are used, as root either: the containers
// share the host's filesystem, PID space and network, and every pod
// reports the address 127.0.0.1, where probes reach it.
//
// Differences from a CRI runtime, on purpose: no registry pulls, and
// without Options.Images no filesystem isolation and no mounts (volumes
// are host paths the process can open itself), and then a container
// needs a command; no network isolation, no user switching, no
// container-level resource limits or updates, no log rotation; exec probes
// run outside the pod's cgroup.
//
// # Concurrency
//
// A Backend is safe for concurrent use and holds no goroutine; the
// Runtime New returns owns one goroutine per running container until
// Close.
//
// # Errors
//
// A command that does not exist or a missing working directory fails
// StartContainer with the monitor's message (the container exits with
// code 128, reason StartError, as with containerd); unknown IDs match
// runtime.ErrNotFound.
package process
