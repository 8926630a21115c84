// Package events holds where an agent's events go: a Recorder its parts
// are built with, which drops what its filter refuses and forwards the
// rest to the recorder of the running agent (the API server's, through
// client-go's broadcaster, or one of the user's).
//
// # Usage
//
//	rec := events.NewRecorder(events.Warnings) // or nil: keep every event
//	rec.Set(myRecorder)                        // or, joined to a cluster:
//	group.Add("events", rec.ToAPIServer(client, nodeName, logger))
//
// # Concurrency
//
// A Recorder is safe for concurrent use; events before it has a recorder
// to forward to are dropped.
package events

import (
	"context"
	"sync/atomic"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
)

// Warnings is a filter (NewRecorder, nodekit.Options.EventFilter) that
// keeps the Warning events (BackOff, Unhealthy, FailedMount, Failed, ...)
// and drops the Normal ones (Pulled, Created, Started, Killing, ...).
func Warnings(eventtype, _ string) bool { return eventtype == v1.EventTypeWarning }

// Recorder forwards events to the recorder it was last Set to: the parts
// get it at construction, the recorder behind it may come later (the
// broadcaster starts with the agent). Events with no recorder yet, or
// refused by the filter, are dropped.
type Recorder struct {
	filter func(eventtype, reason string) bool // nil: keep all
	to     atomic.Pointer[runtime.EventRecorder]
}

var _ runtime.EventRecorder = (*Recorder)(nil)

// NewRecorder returns a Recorder that keeps the events for which filter
// returns true (all of them when filter is nil).
func NewRecorder(filter func(eventtype, reason string) bool) *Recorder {
	return &Recorder{filter: filter}
}

// Set makes rec the recorder events go to.
func (r *Recorder) Set(rec runtime.EventRecorder) { r.to.Store(&rec) }

// Event implements runtime.EventRecorder.
func (r *Recorder) Event(object apiruntime.Object, eventtype, reason, message string) {
	if r.filter != nil && !r.filter(eventtype, reason) {
		return
	}
	if to := r.to.Load(); to != nil && *to != nil {
		(*to).Event(object, eventtype, reason, message)
	}
}

// ToAPIServer returns the part that records r's events to the API
// server, through client-go's broadcaster, while it runs: as the kubelet,
// from the component "kubelet" on host nodeName. It stops the broadcaster
// when its context ends.
func (r *Recorder) ToAPIServer(client kubeclient.Interface, nodeName string, log logr.Logger) run.Runnable {
	return run.Func(func(ctx context.Context) error {
		// client-go's broadcaster logs through the logger in its context.
		b := record.NewBroadcaster(record.WithContext(logr.NewContext(ctx, log.WithName("events"))))
		b.StartRecordingToSink(eventSink{ctx: ctx, client: client.CoreV1()})
		r.Set(b.NewRecorder(kubeclient.NewScheme(), v1.EventSource{Component: "kubelet", Host: nodeName}))
		<-ctx.Done()
		b.Shutdown()
		return nil
	})
}

// eventSink writes the broadcaster's events to the API server, in each
// event's namespace, as client-go's EventSinkImpl does, but with the agent's
// context where EventSinkImpl uses context.Background: a write in flight
// when the agent stops is given up (and logged by the broadcaster) rather
// than left to outlive the agent. Events can be recorded only about objects of
// kubeclient's scheme (core/v1, node.k8s.io/v1, coordination.k8s.io/v1,
// certificates, authentication and authorization): the agent's are about
// pods and nodes.
type eventSink struct {
	ctx    context.Context
	client kubeclient.CoreV1Interface
}

var _ record.EventSink = eventSink{}

func (s eventSink) Create(e *v1.Event) (*v1.Event, error) {
	return s.client.Events(e.Namespace).Create(s.ctx, e, metav1.CreateOptions{})
}

func (s eventSink) Update(e *v1.Event) (*v1.Event, error) {
	return s.client.Events(e.Namespace).Update(s.ctx, e, metav1.UpdateOptions{})
}

func (s eventSink) Patch(e *v1.Event, data []byte) (*v1.Event, error) {
	return s.client.Events(e.Namespace).Patch(s.ctx, e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// Broadcaster records the events of many agents of one process to the API
// server through one client-go broadcaster and one scheme, where each
// agent's Recorder.ToAPIServer runs a broadcaster (a goroutine, its queue
// and its correlator's caches) and a scheme of its own: hollow nodes share
// one. Give each agent Recorder(nodeName) (nodekit.Options.Events), and
// run the Broadcaster (Run) for as long as they run. What each agent's
// events say, and the writes they make, are those of its own
// broadcaster: source component "kubelet" on host nodeName.
type Broadcaster struct {
	client kubeclient.Interface
	log    logr.Logger
	scheme *apiruntime.Scheme
	b      atomic.Pointer[record.EventBroadcaster] // while Run runs
}

// NewBroadcaster returns a Broadcaster that writes through client and
// logs to log. It does no I/O.
func NewBroadcaster(client kubeclient.Interface, log logr.Logger) *Broadcaster {
	return &Broadcaster{client: client, log: log.WithName("events"), scheme: kubeclient.NewScheme()}
}

// Run records the events of the Broadcaster's recorders to the API server
// until ctx ends; events recorded while it does not run are dropped.
func (s *Broadcaster) Run(ctx context.Context) error {
	b := record.NewBroadcaster(record.WithContext(logr.NewContext(ctx, s.log)))
	b.StartRecordingToSink(eventSink{ctx: ctx, client: s.client.CoreV1()})
	s.b.Store(&b)
	<-ctx.Done()
	s.b.CompareAndSwap(&b, nil)
	b.Shutdown()
	return nil
}

// Recorder returns the recorder of the agent of node nodeName: events from
// the component "kubelet" on host nodeName, as Recorder.ToAPIServer's.
func (s *Broadcaster) Recorder(nodeName string) runtime.EventRecorder {
	return &sharedRecorder{s: s, source: v1.EventSource{Component: "kubelet", Host: nodeName}}
}

// sharedRecorder is one agent's recorder on a Broadcaster: client-go's,
// made again when the Broadcaster runs again.
type sharedRecorder struct {
	s      *Broadcaster
	source v1.EventSource
	cur    atomic.Pointer[sharedRecorderOf]
}

type sharedRecorderOf struct {
	b   *record.EventBroadcaster
	rec record.EventRecorder
}

func (r *sharedRecorder) Event(object apiruntime.Object, eventtype, reason, message string) {
	b := r.s.b.Load()
	if b == nil {
		return
	}
	cur := r.cur.Load()
	if cur == nil || cur.b != b {
		cur = &sharedRecorderOf{b: b, rec: (*b).NewRecorder(r.s.scheme, r.source)}
		r.cur.Store(cur)
	}
	cur.rec.Event(object, eventtype, reason, message)
}
