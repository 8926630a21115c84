package pleg

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// EventType says what happened to a container.
type EventType string

// The event types, as the kubelet names them.
const (
	// ContainerStarted: the container is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: the container exited.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: the container no longer exists in the runtime.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: any other change of state (created, unknown).
	ContainerChanged EventType = "ContainerChanged"
	// PodSync asks for a sync of the pod without naming a container; sent
	// after a relist that could not inspect the pod, or to recover after
	// the event buffer overflowed.
	PodSync EventType = "PodSync"
)

// Event is a pod lifecycle event.
type Event struct {
	// ID is the pod UID.
	ID types.UID
	// Type of the event.
	Type EventType
	// Data is the container ID the event concerns (empty for PodSync).
	Data string
}

// EventGenerator produces pod lifecycle events and keeps a Cache of pod
// statuses up to date.
type EventGenerator interface {
	// Run relists (or streams) until ctx ends; it returns after its
	// goroutines have exited.
	Run(ctx context.Context) error
	// Events is the channel the sync loop reads. There is one consumer.
	Events() <-chan *Event
	// Healthy reports an error when the generator has not completed a
	// relist (or received a stream message) recently enough.
	Healthy() error
}

// StatusGetter reads a pod's detailed status from the runtime.
// podruntime.Manager implements it.
type StatusGetter interface {
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error)
}

// Cache holds the newest known runtime status of every pod.
type Cache interface {
	// Get returns the cached status of the pod; an empty status (ID set,
	// no containers) when the pod is unknown.
	Get(uid types.UID) (*runtime.PodStatus, error)
	// GetNewerThan blocks until the cache holds a status of the pod newer
	// than minTime (or the whole cache was refreshed after minTime), then
	// returns it. It returns ctx.Err() when ctx ends first.
	GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*runtime.PodStatus, error)
	// Set records the status (or the error inspecting it) read at
	// timestamp. A Set older than the entry already held is ignored, so
	// writers racing with each other never move a pod's status back.
	Set(uid types.UID, status *runtime.PodStatus, err error, timestamp time.Time)
	// Delete forgets the pod.
	Delete(uid types.UID)
	// UpdateTime records that every pod's entry is valid as of timestamp
	// (a completed relist), waking readers waiting on GetNewerThan.
	UpdateTime(timestamp time.Time)
}
