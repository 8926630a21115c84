// Package backend turns a Backend — six methods that start, stop, watch
// and exec into one container's process — into a complete nodekit runtime:
// NewRuntime returns a runtime.RuntimeService, runtime.ImageService and
// runtime.ContainerEventStreamer (for the evented PLEG) over it. A user
// writes only the Backend and gets the whole kubelet pipeline: probes,
// restart back-off and policies, status, cgroups, logs.
//
// # Usage
//
//	type myBackend struct{ ... }  // Start, Stop, Status, Wait, Exec, Remove
//
//	rt := backend.NewRuntime(&myBackend{}, backend.Options{StateDir: "/var/lib/my-agent/runtime"})
//	defer rt.Close()
//	agent, err := nodekit.New(nodekit.Options{Runtime: rt, ...})
//
// ExampleNewRuntime holds a complete Backend on os/exec; runtime/process
// is the one nodekit ships, whose processes outlive the agent.
//
// # What the adapter keeps
//
// Sandboxes are records only (no process runs for them): ready from
// RunPodSandbox to StopPodSandbox, with Options.PodIP as their address,
// because a pod-network sandbox without an address is recreated at every
// sync. IDs are 64 random hexadecimal digits. Labels, annotations (the
// restart count the runtime manager stores in them), log paths
// (<LogDirectory>/<LogPath>), metadata and configs are kept as given and
// returned in status and list calls. With Options.StateDir each record is
// a JSON file, rewritten at every change, so a Runtime made after the
// agent restarted finds its sandboxes and containers again, asks the
// Backend about the running ones, and learns the exit codes of those that
// ended meanwhile.
//
// Containers go created → running → exited. StartContainer calls
// Backend.Start and then watches the process with Backend.Wait; an exit
// is recorded (code, reason, finish time) and sent as a STOPPED event. A
// start that fails leaves the container exited with code 128 and reason
// StartError, as containerd does. StopContainer calls Backend.Stop with
// the grace period; StopPodSandbox and RemoveContainer of a running
// container stop with none. ExecSync runs Backend.Exec under the timeout:
// a non-zero code is a k8s.io/utils/exec.CodeExitError (what exec probes
// read), a timeout a DeadlineExceeded status.
//
// Images: a Backend without images of its own has every image present
// (its commands are found on the host), with an ID derived from the
// reference; PullImage downloads nothing. A Backend that implements
// ImageResolver says which images it has. A container needs a command,
// unless the Backend knows its image's entrypoint (ImageCommander).
//
// Where it differs from a CRI runtime such as containerd: no network
// namespace or CNI (every pod has Options.PodIP), no pause process, no
// container stats, no attach or port-forward, and mounts and security
// contexts are passed to the Backend in Spec.Config for it to honour or
// not.
//
// # Concurrency
//
// A Runtime is safe for concurrent use; it calls its Backend concurrently
// too (see Backend). It owns one goroutine per running container (in
// Backend.Wait), all ended by Close.
//
// # Errors
//
// Unknown IDs are errors matching runtime.ErrNotFound (runtime.IsNotFound);
// a runtime Closed answers Unavailable; invalid arguments and calls in the
// wrong state (starting a running container, exec in an exited one) carry
// the gRPC InvalidArgument and FailedPrecondition codes, as a CRI runtime's.
// A record that cannot be read back from StateDir is logged and skipped.
package backend
