package sources

import (
	"context"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// Op is the kind of change an Update carries.
type Op int

// The operations, as the kubelet's pod config delivers them.
const (
	// Add: pods new to the node.
	Add Op = iota
	// Update: pods whose spec (or labels, annotations, deletion grace)
	// changed.
	Update
	// Delete: pods that were marked for graceful deletion
	// (deletionTimestamp set). The sync loop treats it as an Update.
	Delete
	// Remove: pods their source no longer lists.
	Remove
	// Reconcile: pods whose status alone changed.
	Reconcile
)

func (o Op) String() string {
	switch o {
	case Add:
		return "ADD"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	case Remove:
		return "REMOVE"
	case Reconcile:
		return "RECONCILE"
	}
	return "UNKNOWN"
}

// PodUpdate is one change delivered to the sync loop. Its pods are
// shared (see the package doc's Concurrency): treat them as read-only.
type PodUpdate struct {
	Op     Op
	Pods   []*v1.Pod
	Source string
}

// Annotations the merge and the static sources put on pods, the kubelet's
// keys.
const (
	// AnnotationSource names the source a pod came from.
	AnnotationSource = podmodel.AnnotationSource
	// AnnotationSeen is the time the pod was first seen (RFC3339Nano).
	AnnotationSeen = podmodel.AnnotationSeen
	// AnnotationHash is the hash a static source computed from the pod's
	// manifest.
	AnnotationHash = podmodel.AnnotationHash
	// AnnotationMirror marks a mirror pod in the API server.
	AnnotationMirror = podmodel.AnnotationMirror
)

// Names of the kubelet's sources; a pod from any source but APIServer is a
// static pod.
const (
	FileSource      = "file"
	HTTPSource      = "http"
	APIServerSource = podmodel.APIServerSource
)

// A Source delivers the pods it wants on the node as full snapshots: each
// value sent on the channel is the complete set of that source's pods,
// replacing the previous one. The first snapshot marks the source ready.
//
// Run blocks until ctx ends and returns nil then; it returns after every
// goroutine it started has exited. Errors with single items (a bad manifest)
// are reported by the source and never stop it.
type Source interface {
	Run(ctx context.Context, snapshots chan<- []*v1.Pod) error
}

// NodeNamer is the optional capability of a Source whose pods depend on
// the node's name (static pods: their names, UIDs and spec.nodeName, as
// sources/file and sources/http make them): the agent calls SetNodeName
// with its own name before the source runs, so that the name is given
// once. SetNodeName fails when the source was made for another node.
type NodeNamer interface {
	SetNodeName(name string) error
}

// ReadOnlyPods is the optional capability of a Source whose snapshots
// hold pods that nothing modifies once sent (the API-server source's: its
// watch's decoded objects, replaced and never changed). The merge then
// keeps a shallow copy of each pod, a Pod of its own with its own
// annotations that shares the spec's, metadata's and status's slices,
// maps and pointers with the source's object, where it keeps a deep copy
// of the pods of other sources. What the merge hands out is the same
// either way; a pod costs the merge about a tenth of the memory.
type ReadOnlyPods interface {
	// PodsReadOnly reports whether the pods of the source's snapshots
	// are never modified once sent.
	PodsReadOnly() bool
}

// LoggerSetter is the optional capability of a Source that logs (the
// manifests it rejects, say): the agent calls SetLogger with its own
// logger before the source runs, so that a source made without a logger
// of its own reports through the agent's rather than into the void.
type LoggerSetter interface {
	SetLogger(log logr.Logger)
}

// Chan is a Source fed through a channel: each slice of pods sent on it is
// passed on as the source's next snapshot, until Run's context ends. A
// program that has its pods in hand (a test, a source built into another
// part of the program) makes one, hands it to the agent, and sends:
//
//	pods := make(sources.Chan, 1)
//	// Options.Sources: []nodekit.NamedSource{{Name: "mine", Source: pods}}
//	pods <- []*v1.Pod{pod}
//
// The agent sees the source ready once its first snapshot arrived.
type Chan chan []*v1.Pod

// Run passes on each snapshot sent on c until ctx ends; it returns nil.
func (c Chan) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-c:
			select {
			case snapshots <- pods:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(ctx context.Context, snapshots chan<- []*v1.Pod) error

// Run calls f.
func (f SourceFunc) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	return f(ctx, snapshots)
}

var _ Source = SourceFunc(nil)
