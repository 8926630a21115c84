// Package runtimesuite is a conformance suite for nodekit runtimes: any
// runtime.RuntimeService (a CRI runtime through runtime/cri, the in-memory
// runtimetest, a Backend behind runtime/backend, runtime/process) runs it
// from its own tests and learns whether it behaves as the agent expects.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		runtimesuite.Run(t, func(t *testing.T) runtimesuite.Config {
//			rt := myruntime.New(...)
//			t.Cleanup(rt.Close)
//			return runtimesuite.Config{Runtime: rt, Processes: true}
//		})
//	}
//
// # What it checks
//
// Every runtime: the sandbox lifecycle (ready, stopped, removed; status,
// metadata, creation time); the container lifecycle (created, running,
// exited with a non-zero code and a reason after a stop, removed with its
// sandbox); exit codes and reasons (0 "Completed", others "Error") with
// start and finish times; NotFound for the status of unknown IDs and
// success for removing them; stop and remove called twice; list filters
// (ID, sandbox, state, labels); labels and annotations round trip through
// status and list; the event stream (CREATED, STARTED, STOPPED, DELETED
// for a container, skipped when the runtime has none or answers
// Unimplemented); ExecSync in running, exited and unknown containers; and,
// with Config.Restart, that a restarted runtime finds its running
// containers (same ID and start time, annotations intact), learns the exit
// code of one that ended, and keeps created containers startable.
//
// Runtimes that run real processes (Config.Processes): ExecSync output,
// exit code (k8s.io/utils/exec ExitStatus) and timeout (DeadlineExceeded);
// the log file in the CRI format at <LogDirectory>/<LogPath>, stdout and
// stderr, an unterminated last line (partial, "P", as containerd writes
// it); environment variables and working directory; a container that exits on SIGTERM stops within its grace
// period with its own exit code; one that ignores SIGTERM is killed after
// the grace period with exit code 137.
//
// The suite makes host-network sandboxes (no CNI needed) with log
// directories of their own, pods with unique names and UIDs in namespace
// "runtimesuite", and removes them at the end of each subtest, so it can
// share a runtime with other tests. Containers run "sh -c SCRIPT" in
// Config.Image, which must be present: the suite never pulls.
//
// # Concurrency
//
// Subtests run one after another; Run may be called from parallel tests
// on different runtimes.
package runtimesuite
