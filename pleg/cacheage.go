package pleg

import "time"

// CacheMaxAge is how recently a StatusCache must have been declared
// current (StatusCache.Pods, RunningContainers, Changes) for the agent's
// readers to take the runtime's pods and containers from it rather than
// list the runtime: a few refreshes of the relisting PLEG, which
// refreshes every second. The evented one keeps its cache live
// (StatusCache.SetLive) while its stream works, current without a
// refresh.
const CacheMaxAge = 5 * time.Second
