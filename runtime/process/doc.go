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
// SIGKILL, reason OOMKilled when its pod's memory cgroup recorded an OOM
// kill. StopContainer sends SIGTERM to the whole process group, then
// SIGKILL when the grace period is over; when the main process exits, what
// is left of its group is killed, as a container's processes end with its
// init. Exec (exec probes) runs the command the same way, as a host
// process with the container's environment and working directory. The
// image is not used: every image is present; a container must give its
// command (pods written for busybox, "sh -c ...", run as they are).
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
// each container's monitor joins the pod's cgroup (the sandbox's cgroup
// parent, which the agent's cgroup.PodManager made) through the cgroup
// package before starting the process, so the pod's limits apply to the
// process (and to its monitor's few MB). No namespaces are used, as root
// either: the containers share the host's filesystem, PID space and
// network, and every pod reports the address 127.0.0.1, where probes reach
// it.
//
// Differences from a CRI runtime, on purpose: no image store, no
// filesystem or network isolation, no mounts (volumes are host paths the
// process can open itself), no user switching, no container-level cgroup
// or resource updates, no log rotation; exec probes run outside the pod's
// cgroup.
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
