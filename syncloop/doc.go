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
// # Concurrency
//
// The handler is called from the loop's goroutine only, one call at a time;
// it must not block for long (hand work to pod workers). Healthy may be called
// from any goroutine.
package syncloop
