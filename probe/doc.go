// Package probe runs the liveness, readiness and startup probes of pods'
// containers, as the kubelet's prober does: exec (through the runtime's
// ExecSync), HTTP GET, TCP socket and gRPC health probes, one worker
// goroutine per (pod, container, probe type), and per-container results
// that feed the sync loop and the pod status.
//
// # Usage
//
// The agent creates a Manager, runs it, and connects it at four points:
//
//	m, err := probe.NewManager(statusManager.GetPodStatus, probe.Options{
//		Runtime:  runtimeService,         // runs exec probes (ExecSync)
//		Logger:   logger,
//	})
//	go m.Run(ctx)
//	m.AddPod(pod)                      // on admission
//	m.UpdatePodStatus(pod, &status)    // while computing the pod's status
//	m.RemovePod(pod)                   // when the pod is terminated or removed
//	// syncloop.Config{Liveness: m.Liveness(), Readiness: m.Readiness(), Startup: m.Startup()}
//	// podruntime.Options{Unhealthy: m.Unhealthy}
//
// A Prober runs one probe; DefaultProber handles the four handlers of the
// Pod API, and ProberFunc wraps a function, so a user can replace one
// handler and delegate the others:
//
//	def := probe.NewDefaultProber(probe.ProberOptions{Runtime: rt})
//	p := probe.ProberFunc(func(ctx context.Context, r probe.Request) (probe.Result, string, error) {
//		if r.Probe.Exec != nil {
//			return myExec(ctx, r)
//		}
//		return def.Probe(ctx, r)
//	})
//
// # Semantics
//
// The kubelet's, read from pkg/kubelet/prober and pkg/probe:
//   - zero periodSeconds, timeoutSeconds, successThreshold and
//     failureThreshold default to 10 s, 1 s, 1 and 3;
//   - a new container (a new container ID in the pod status) starts with
//     readiness Failure, liveness Success and startup Unknown; the results
//     of its previous instance are forgotten;
//   - no probe runs before initialDelaySeconds have passed since the
//     container started; liveness and readiness probes wait until the
//     container has started (its startup probe succeeded), and the startup
//     probe stops then;
//   - a result changes after successThreshold successes or
//     failureThreshold failures in a row; a liveness or startup failure
//     holds the worker (no more probes) until the container ID changes;
//   - results are published on the channels only when they change; a
//     container that is not running is given Failure; a worker stops when
//     the pod reaches a terminal phase or its container terminated under
//     restartPolicy Never, or when the pod is removed;
//   - a probe the Prober could not run (an error) is tried three times,
//     then ignored;
//   - the first probe of a worker started within a period of Run's start
//     waits a random part of the period;
//   - probe times are rounded up to a multiple of Options.Alignment (50 ms
//     by default) since Run's start, so that probes due at about the same
//     time share one wake-up of the process: with 200 HTTP probes a second
//     it cuts the CPU time per probe by about 40%;
//   - HTTP: scheme, host (the pod IP by default), port by number or by
//     container port name, path and query, headers (a Host header sets the
//     request's host), User-Agent kube-probe/<version>, Accept */*,
//     keep-alives off (one connection per probe, with the kubelet's
//     one-second SO_LINGER and no TCP keep-alive), status 200–399
//     succeeds; redirects to the same host are followed (at most 10, more
//     is a failure), a redirect to another host is not followed and
//     succeeds with a warning; at most 10 KiB of the body is read;
//   - exec: the command, its $(VAR) references to the container's plain
//     environment expanded, runs through ExecSync with the probe's timeout;
//     exit code 0 succeeds, another code or the timeout fails; a command
//     whose expansion passes 1 MiB for an element or 8 MiB in all is not
//     run and fails, its output naming the element ("exec probe
//     command[2]: too long: ..."), where the kubelet sets no bound;
//   - TCP: a connection within the timeout succeeds; gRPC: Health/Check
//     with the probe's service in plaintext answers SERVING.
//
// Differences from the kubelet: the worker's success and failure counts
// start over with a new container; probe times are aligned (see above;
// Alignment < 0 turns it off); an HTTP probe uses no proxy; a probe whose
// host would be empty (no pod IP) is an error instead of a probe of the
// local host; errored probes are reported to Metrics as Unknown.
//
// # Events
//
// With Options.Recorder set (any client-go record.EventRecorder), every
// failed probe records a Warning event Unhealthy on the pod, with the
// container's field path (spec.containers{name}, or
// spec.initContainers{name} for a sidecar), as the kubelet does:
// "Liveness probe failed: <output>" (Readiness, Startup), or "Liveness
// probe errored and resulted in unknown state: <error>" for a probe that
// could not be run. A probe that succeeded with a warning (an HTTP probe
// redirected to another host, which is not followed) records a Warning
// event ProbeWarning, "Readiness probe warning: Probe terminated
// redirects, Response body: ...", and counts as a success; a response
// body beyond 10 KiB is cut there without an event, as the kubelet does. Failures below the failure threshold record events
// too; a liveness or startup worker on hold records none. The
// recorder's correlator aggregates the repeats.
//
// # Concurrency
//
// A Manager is safe for concurrent use. Its workers are goroutines owned by
// Run, one per worker and none besides, even during a probe: the default
// HTTP transport writes the request and reads the response on the
// worker's goroutine and keeps no idle connection, unlike http.Transport,
// which adds two goroutines per connection. Run returns once they have
// all exited. RemovePod
// cancels a worker's ongoing probe. A worker waits while its result
// channel is full: the sync loop must keep reading the three channels.
//
// # Errors
//
// NewManager fails when a required option is missing. Probes never return
// errors to the caller: a failed probe is a Failure result, a probe that
// could not run is logged and ignored.
package probe
