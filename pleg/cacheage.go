package pleg

import "time"

// CacheMaxAge is how recently a StatusCache must have been declared
// current (StatusCache.Pods, RunningContainers, Changes) for the agent's
// readers to take the runtime's pods and containers from it rather than
// list the runtime: a few refreshes of either PLEG (the relisting one
// refreshes every second, the evented one every 2 s while its stream
// works).
const CacheMaxAge = 5 * time.Second
