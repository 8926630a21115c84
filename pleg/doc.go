// Package pleg holds pod lifecycle event generators (PLEGs) and the pod
// status cache they keep.
//
// A PLEG watches the container runtime and tells the sync loop which pods
// changed: ContainerStarted, ContainerDied, ContainerRemoved and
// ContainerChanged events. Generic relists the runtime every second and diffs
// each container's state against the previous relist, the kubelet's generic
// PLEG. Alongside the events it keeps a Cache of each pod's runtime status,
// which the pod workers read with "newer than" semantics.
//
// # Concurrency
//
// Generic is safe for concurrent use; Run must be called once. The Cache
// implementation is safe for concurrent use.
//
// # Errors
//
// A relist that fails is logged and retried on the next period; pods whose
// inspection failed are inspected again on the next relist. When the event
// channel is full, the event is not lost silently: the overflow is logged,
// counted, and the pod is re-examined on the next relist.
package pleg
