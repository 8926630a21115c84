// Package periodic runs the periodic work of many parts, of many agents of
// one process, from one goroutine: a Driver keeps every task's next due
// time in one heap and starts each call on a worker goroutine: one that
// ran calls before and waits for the next (at most 4 wait, whatever the
// number of tasks, so that a call does not grow a new goroutine's stack
// each time), else a new one. Hollow nodes share one: an idle node's Lease
// renewals and Node status passes then hold no goroutine (and no stack)
// of their own between calls. A single agent does not need one: without
// a Driver, Go runs a task's loop on a goroutine of its own with a timer,
// as a part's own loop would.
//
// # Usage
//
//	d := periodic.NewDriver()
//	go d.Run(ctx)
//	// in a part's Run:
//	wait := d.Go(ctx, 0, func(ctx context.Context) time.Duration {
//		renew(ctx)
//		return 10 * time.Second // the next call, 10s after this one returned
//	})
//	<-ctx.Done()
//	wait() // the call in flight returned; no other starts
//
// A part whose loop also wakes when something happens (a pod added) uses
// Start, whose Task.Reset(0) makes the next call due at once.
//
// nodekit.Options.Periodic hands one Driver to the parts that take one:
// the Node's registration, status passes and Lease renewals (node), the
// pod status writer (status), the runtime's health checks, the API
// server source's deliveries from a shared watch (sources/apiserver),
// container GC (gc), the volume manager's passes (volume), the user
// namespace clean-ups (userns) and the retries of deferred resizes.
//
// # Timing
//
// A task's next call is due the duration its call returned after that
// call returned (a sliding period, as the kubelet's wait.JitterUntil with
// sliding set). Calls of one task never overlap; calls of different tasks
// run concurrently. A task whose call is due while the Driver is not
// running waits for it to run.
//
// # Concurrency
//
// A Driver is safe for concurrent use, and a nil *Driver is valid (each
// task then has its own goroutine). Run is called once; after it returned
// no call starts.
package periodic
