// Package syncloop is the engine of a node agent: the kubelet's sync loop.
//
// A Loop selects over the pod configuration updates (sources), the pod
// lifecycle events (pleg), a sync tick that picks up pods whose work is due,
// the probe result channels, a housekeeping tick, and any extra channels a
// user registers, and turns each message into a call of a SyncHandler.
//
// # Usage
//
//	loop, err := syncloop.New(handler, syncloop.Config{
//		Updates:      podConfig.Updates(),
//		PLEG:         gen.Events(),
//		Pods:         podManager,
//		Work:         queue,
//		SourcesReady: podConfig.SourcesReady,
//	})
//	...
//	err = loop.Run(ctx)
//
// # Differences from the kubelet
//
// After a housekeeping pass, the housekeeping ticks that come within 9
// times the pass's duration are skipped, so that housekeeping takes at
// most a tenth of the loop's time; the kubelet runs a pass at every 2 s
// tick, back to back when a pass takes longer. With the default period, a
// pass under 200 ms (10,000 pods take 50–130 ms on an idle machine)
// changes nothing; at more pods or on a
// loaded machine, orphans are cleaned up a few seconds later rather than
// the loop spending most of its time on housekeeping while PLEG events
// wait.
//
// With a work queue that tells when its earliest pod is due (DueQueue:
// podworker.Queue), the loop sleeps until the first sync tick at or after
// that time instead of waking at every tick to ask the queue: the work is
// taken at the same tick as the kubelet's would be, and an idle agent's
// loop does not wake every second (a thousand hollow nodes in one process
// woke a thousand times a second for nothing).
//
// With Config.HousekeepingDue (the agent passes the pod workers' Ended), a
// pass also runs when a pod's worker finished, no sooner than a quarter
// period after the last one began: a deleted pod's runtime objects and
// state go within half a second of its end rather than at the next tick,
// where the kubelet leaves its containers and sandbox to the container
// garbage collector (every minute).
//
// With a handler that tells when housekeeping has nothing to do
// (HousekeepingSettler: synchandler.Handler, through nodekit's wrapping),
// the loop stops its 2 s housekeeping ticks after a pass that leaves it
// so, but for one a minute (Config.HousekeepingIdlePeriod), until any
// other message arrives: a configuration update, a PLEG event, work, a
// probe result or HousekeepingDue, which are what make work for
// housekeeping; the ticks then come every 2 s again from that message on.
// The kubelet wakes every 2 s whatever happens. A pass finds the same
// leftovers as the kubelet's within 2 s of what made them, as long as
// that reached the loop; what changes out of its sight (a mirror pod the
// API server lost, a directory someone else left) waits for the idle
// tick, as the handler's passes in full once a minute did already. This
// is what lets an idle agent's loop sleep: a thousand hollow nodes in one
// process woke 500 times a second for passes that found nothing.
//
// A housekeeping pass that fails, or a runtime that stays unhealthy, is
// logged once, then at most once a minute with the count of the lines not
// logged ("suppressed"), rather than on every pass: the kubelet logs each.
//
// # Concurrency
//
// The handler is called from the loop's goroutine only, one call at a time;
// it must not block for long (hand work to pod workers). Healthy may be called
// from any goroutine.
package syncloop
