package nodekit

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
	"github.com/nodekit/nodekit/runtime"
)

// EventRecorder receives the pod lifecycle events (Pulled, Created,
// Started, Killing, BackOff, Unhealthy, FailedMount, ...). client-go's
// record.EventRecorder (and its FakeRecorder) is one.
type EventRecorder = runtime.EventRecorder

// WarningEvents is an Options.EventFilter that keeps the Warning events
// (BackOff, Unhealthy, FailedMount, Failed, ...) and drops the Normal ones
// (Pulled, Created, Started, Killing, ...).
func WarningEvents(eventtype, _ string) bool { return eventtype == v1.EventTypeWarning }

// recorder forwards events to the recorder of the running agent: the
// parts get it at construction, the broadcaster behind it starts with Run.
// Events before Run, with no recorder, or refused by the filter are
// dropped.
type recorder struct {
	filter func(eventtype, reason string) bool // nil: keep all
	to     atomic.Pointer[EventRecorder]
}

func (r *recorder) set(rec EventRecorder) { r.to.Store(&rec) }

// Event implements EventRecorder.
func (r *recorder) Event(object apiruntime.Object, eventtype, reason, message string) {
	if r.filter != nil && !r.filter(eventtype, reason) {
		return
	}
	if to := r.to.Load(); to != nil && *to != nil {
		(*to).Event(object, eventtype, reason, message)
	}
}

// startEvents sets up where events go: Options.Events when set, else, for
// an agent joined to a cluster, the API server through client-go's
// broadcaster. The returned function stops the broadcaster.
func (a *Agent) startEvents(ctx context.Context) (stop func()) {
	if a.opts.Events != nil {
		a.recorder.set(a.opts.Events)
		return func() {}
	}
	if a.opts.KubeClient == nil {
		return func() {}
	}
	// client-go's broadcaster logs through the logger in its context.
	b := record.NewBroadcaster(record.WithContext(logr.NewContext(ctx, a.log.WithName("events"))))
	b.StartRecordingToSink(eventSink{ctx: ctx, client: a.opts.KubeClient.CoreV1()})
	a.recorder.set(b.NewRecorder(kubeclient.NewScheme(), v1.EventSource{Component: "kubelet", Host: a.opts.NodeName}))
	return b.Shutdown
}

// eventSink writes the broadcaster's events to the API server, in each
// event's namespace, as client-go's EventSinkImpl does, but with the agent's
// context where EventSinkImpl uses context.Background: a write in flight
// when the agent stops is given up (and logged by the broadcaster) rather
// than left to outlive Run. Events can be recorded only about objects of
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

// discardEvents is an EventRecorder that drops every event.
type discardEvents struct{}

func (discardEvents) Event(apiruntime.Object, string, string, string) {}
