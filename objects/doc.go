// Package objects gets the ConfigMaps and Secrets a node's pods refer to:
// in environment variables (configMapKeyRef, secretKeyRef, envFrom), in
// configMap, secret and projected volumes, and in imagePullSecrets. Every
// part that reads them takes a Getter, so one source serves them all.
//
// # Usage
//
// An agent joined to a cluster reads them through the API server (the
// Agent wires a client-go Getter), cached:
//
//	c, err := objects.NewCache(apiGetter, objects.CacheOptions{})
//	res := env.New(env.Options{Objects: c})
//	cm, err := configmap.New(c, configmap.Options{})
//
// A standalone agent supplies its own, for example from files:
//
//	get := objects.Funcs{ConfigMap: readConfigMapFile, Secret: readSecretFile}
//
// # The cache
//
// Cache follows the kubelet's cache-based ConfigMap and Secret managers
// (configMapAndSecretChangeDetectionStrategy Cache): an object read less
// than the TTL ago (default one minute, the kubelet's default) is served
// from memory; an older one is read again. RegisterPod marks the objects of
// a pod the cache sees for the first time stale, so a new pod always sees
// the objects as they are when it starts, as with the kubelet. Errors
// (a missing object included) are not cached: the next read asks again.
// Entries older than the TTL are dropped as reads go on, so the cache
// holds no more than what was read within one TTL. It starts no goroutine.
//
// nodekit differs from the kubelet on purpose in one point: a read of an
// object no registered pod refers to is served (the kubelet's manager
// refuses it), so the cache can stand in for a client wherever one is
// taken.
//
// # Concurrency
//
// Cache and Funcs are safe for concurrent use when the functions
// or the getter they wrap are.
//
// The package depends on the API types and apimachinery only, not on
// client-go, so the runtime's environment resolution can use it.
//
// # Errors
//
// A missing object is an error that apierrors.IsNotFound recognises,
// whatever the source: Funcs with a nil function returns one, and getters
// of a user's must too (apierrors.NewNotFound).
package objects
