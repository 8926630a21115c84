// Package runtimetest provides Runtime, an in-memory container runtime for
// tests and benchmarks. It implements nodekit's runtime.RuntimeService,
// runtime.ImageService and runtime.ContainerEventStreamer the way a CRI
// runtime (containerd, CRI-O) behaves, without running anything.
//
// # Usage
//
//	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
//	defer rt.Close()
//	sandboxID, _ := rt.RunPodSandbox(ctx, sandboxConfig, "")
//	id, _ := rt.CreateContainer(ctx, sandboxID, containerConfig, sandboxConfig)
//	_ = rt.StartContainer(ctx, id)
//	...
//	_ = rt.ExitContainer(id, 1, "")  // make it crash
//	if rt.Calls("StartContainer") != 1 { ... }
//
// Sandboxes are ready as soon as they run, with an address from
// 10.88.0.0/16 (none on the host network); stopping a sandbox kills its
// containers, removing it removes them. Containers go created → running →
// exited. Images must be present before CreateContainer: listed in
// Options.Images, added with ImageAdd, or pulled (every pull succeeds
// unless SetPullable says otherwise). References are normalised as
// containerd does ("busybox" is "docker.io/library/busybox:latest").
//
// # Container programs
//
// A started container runs its command and arguments as a tiny shell
// script, so that the manifests of a test also run on busybox in a real
// runtime. The words of Command and Args are joined with spaces and split
// into statements on ';', '&&', '||' and newlines; leading shell wrappers
// ("sh -c", "/bin/bash -ec", "exec") are skipped. Four commands are
// understood:
//
//   - sleep N: N seconds, fractional allowed, with an optional s, m, h or d
//     suffix; "sleep infinity" runs until stopped;
//   - exit N: the container exits with code N (modulo 256) once the sleeps
//     before it are over; the rest of the script is ignored;
//   - true and false: status 0 and 1.
//
// Every other command (echo, the image's entrypoint) takes no time and
// succeeds. At the end of the script the container exits with the status of
// the last command (so a final false exits 1). A script with none of the
// four commands, an empty command, or a loop (while, until, for) runs until
// stopped. For example
//
//	["sh", "-c", "echo hi; sleep 2; exit 1"]  exits 1 after 2 s
//	["sleep", "3600"]                          exits 0 after an hour
//	["nginx", "-g", "daemon off;"]             runs until stopped
//
// Exit code 0 gives reason "Completed", any other "Error". StopContainer
// kills a running container at once: exit code 137, reason "Error",
// whatever the timeout (LastStopTimeout reports it). ExitContainer ends a
// container from the test. Programs run on timers (time.AfterFunc), so they
// follow the fake clock of testing/synctest.
//
// # Events
//
// GetContainerEvents streams an event for every change of a container or
// sandbox, with the statuses of the sandbox and its containers, as
// containerd does. As containerd's, the stream is never dropped for being
// slow: once 100 events wait for a subscriber, the calls that send events
// (RunPodSandbox, CreateContainer, StartContainer, the stops and
// removals) wait until it takes them, so a slow consumer slows the runtime
// down.
//
// # Faults
//
// InjectError and InjectErrorOnce make a method fail; SetDown makes every
// call fail with an Unavailable status, as when the runtime goes away.
// Calls counts the calls of each method (a GetContainerEvents call is
// counted before it subscribes: WaitSubscribers waits until event streams
// have subscribed). Options.Latency delays every call.
// Unknown IDs give a gRPC NotFound status (status.Code(err) ==
// codes.NotFound), as real runtimes do; removing what does not exist
// succeeds, as the CRI requires.
//
// # Concurrency
//
// Runtime is safe for concurrent use. ListPodSandbox and ListContainers
// take a read lock and return the stored objects in a fresh slice without
// copying them: objects are replaced, never changed, when their state
// changes. Callers must therefore not modify anything a Runtime returns.
// Memory is bounded by the live objects: removed sandboxes and containers
// are forgotten and calls are counted, not logged.
package runtimetest
