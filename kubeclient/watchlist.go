package kubeclient

import "k8s.io/client-go/tools/cache"

// ListWatcher returns lw for client-go's reflector over c. The reflector
// lists by streaming by default (a watch with sendInitialEvents whose
// initial events end with a bookmark) unless the client says it cannot.
// A Clientset can, against any API server that does. A client with an
// IsWatchListSemanticsUnSupported method (client-go's clientsets and fakes,
// clientset.From) says itself. Any other implementation of Interface, such
// as a test's own small fake, is taken not to, so that an informer over it
// lists and then watches rather than waiting for a bookmark that never
// comes.
func ListWatcher(lw *cache.ListWatch, c Interface) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(lw, watchListSemantics{unsupported: !streamsLists(c)})
}

func streamsLists(c Interface) bool {
	switch c := c.(type) {
	case *Clientset:
		return true
	case interface{ IsWatchListSemanticsUnSupported() bool }:
		return !c.IsWatchListSemanticsUnSupported()
	}
	return false
}

// watchListSemantics answers client-go's watchlist.DoesClientNotSupportWatchListSemantics.
type watchListSemantics struct{ unsupported bool }

func (w watchListSemantics) IsWatchListSemanticsUnSupported() bool { return w.unsupported }
