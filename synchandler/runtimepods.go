package synchandler

import (
	"context"
	"time"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// CachedRuntimePods returns rp listing the runtime's pods for
// housekeeping from cache, the PLEG's, while that cache is current (see
// cachedRuntimePods). Use it only with a PLEG of package pleg, which keeps
// every pod of the runtime in its cache.
func CachedRuntimePods(rp RuntimePods, cache *pleg.StatusCache) RuntimePods {
	return cachedRuntimePods{RuntimePods: rp, cache: cache}
}

// cachedRuntimePods lists the runtime's pods for housekeeping from the
// cache of the agent's own PLEG while that cache is current, and from the
// runtime otherwise. Housekeeping runs every 2 s and wants every pod the
// runtime holds; listing them there costs two CRI calls whose answers
// grow with the pods, which at a thousand pods is most of an idle agent's
// CPU. The PLEGs of package pleg keep every pod of the runtime in their
// cache, read after each change, so the cache is the same list (see
// pleg.StatusCache.Pods); the kubelet lists the runtime through a cache of
// its own, refreshed every 2 s.
type cachedRuntimePods struct {
	RuntimePods
	cache *pleg.StatusCache
}

func (c cachedRuntimePods) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	if all {
		if pods, ok := c.cache.Pods(time.Now().Add(-pleg.CacheMaxAge)); ok {
			return pods, nil
		}
	}
	return c.RuntimePods.GetPods(ctx, all)
}

// changes counts the changes of the cache's pods; false while
// GetPods(all) would list the runtime rather than read the cache.
func (c cachedRuntimePods) changes() (uint64, bool) {
	return c.cache.Changes(time.Now().Add(-pleg.CacheMaxAge))
}
