package objects

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long Cache serves an object it read: the kubelet's
// default for its ConfigMap and Secret caches.
const DefaultTTL = time.Minute

// CacheOptions configure a Cache. The zero value is usable.
type CacheOptions struct {
	// TTL is how long an object read is served from memory. Defaults to
	// DefaultTTL; negative means never (every read asks the getter, which
	// still lets RegisterPod and one getter serve every part).
	TTL time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

type kind uint8

const (
	kindConfigMap kind = iota
	kindSecret
)

type key struct {
	kind            kind
	namespace, name string
}

type entry struct {
	obj     any // *v1.ConfigMap or *v1.Secret
	fetched time.Time
}

// Cache serves the objects a Getter returns for a time (see the package
// doc). It is safe for concurrent use and holds no goroutine.
type Cache struct {
	get   Getter
	ttl   time.Duration
	clock clock.PassiveClock

	mu        sync.Mutex
	entries   map[key]entry
	pods      map[types.UID]bool
	lastSweep time.Time
}

var _ Getter = (*Cache)(nil)

// NewCache returns a Cache over get. It does no I/O.
func NewCache(get Getter, opts CacheOptions) (*Cache, error) {
	if get == nil {
		return nil, errors.New("objects: NewCache needs a Getter")
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Cache{get: get, ttl: opts.TTL, clock: opts.Clock, entries: map[key]entry{}, pods: map[types.UID]bool{}}, nil
}

// GetConfigMap returns the ConfigMap, from memory when read less than the
// TTL ago. The caller must not modify it.
func (c *Cache) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	k := key{kindConfigMap, namespace, name}
	if obj, ok := c.cached(k); ok {
		return obj.(*v1.ConfigMap), nil
	}
	cm, err := c.get.GetConfigMap(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	c.store(k, cm)
	return cm, nil
}

// GetSecret returns the Secret, from memory when read less than the TTL
// ago. The caller must not modify it.
func (c *Cache) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	k := key{kindSecret, namespace, name}
	if obj, ok := c.cached(k); ok {
		return obj.(*v1.Secret), nil
	}
	s, err := c.get.GetSecret(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	c.store(k, s)
	return s, nil
}

func (c *Cache) cached(k key) (any, bool) {
	if c.ttl < 0 {
		return nil, false
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(now)
	e, ok := c.entries[k]
	if !ok || now.Sub(e.fetched) >= c.ttl {
		return nil, false
	}
	return e.obj, true
}

func (c *Cache) store(k key, obj any) {
	if c.ttl < 0 || obj == nil {
		return
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[k] = entry{obj: obj, fetched: now}
}

// sweepLocked drops the entries older than the TTL, at most once a TTL.
func (c *Cache) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < c.ttl {
		return
	}
	c.lastSweep = now
	for k, e := range c.entries {
		if now.Sub(e.fetched) >= c.ttl {
			delete(c.entries, k)
		}
	}
}

// Len returns the number of objects held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// RegisterPod tells the cache that pod runs on the node. The first time it
// sees the pod (by UID), the objects the pod refers to are read anew at
// their next read, as the kubelet's managers do when a pod is added.
func (c *Cache) RegisterPod(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods[pod.UID] {
		return
	}
	c.pods[pod.UID] = true
	cms, secrets := References(pod)
	for _, n := range cms {
		delete(c.entries, key{kindConfigMap, pod.Namespace, n})
	}
	for _, n := range secrets {
		delete(c.entries, key{kindSecret, pod.Namespace, n})
	}
}

// UnregisterPod forgets the pod; the objects it read age out.
func (c *Cache) UnregisterPod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}
