package node_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/node"
)

type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Event(obj apiruntime.Object, eventtype, reason, message string) {
	ref, _ := obj.(*v1.ObjectReference)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ref.Kind+"/"+ref.Name+" "+eventtype+" "+reason+": "+message)
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out
}

// TestNodeEventsAndPressure: the Node carries nodekit's version, reports
// the pressure conditions it is given and status.images, and records the
// kubelet's node events: Starting, one per condition at registration,
// then one per change.
func TestNodeEventsAndPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		rec := &events{}
		var mu sync.Mutex
		var pressure []v1.NodeConditionType
		ctl := newController(t, c, node.Options{
			Recorder: rec,
			Pressure: func() []v1.NodeConditionType { mu.Lock(); defer mu.Unlock(); return slices.Clone(pressure) },
			Images: func(context.Context) ([]*runtimeapi.Image, error) {
				return []*runtimeapi.Image{{Id: "sha256:a", RepoTags: []string{"busybox:1.36"}, Size: 100}}, nil
			},
		})
		stop := start(t, ctl)
		synctest.Wait()
		n := getNode(t, c)
		if _, ok := n.Annotations[node.AnnotationVersion]; !ok {
			t.Errorf("annotations %v lack %s", n.Annotations, node.AnnotationVersion)
		}
		if diff := cmp.Diff([]v1.ContainerImage{{Names: []string{"busybox:1.36"}, SizeBytes: 100}}, n.Status.Images); diff != "" {
			t.Errorf("images (-want +got):\n%s", diff)
		}
		want := []string{
			"Node/n1 Normal Starting: Starting node agent.",
			"Node/n1 Normal NodeHasSufficientMemory: Node n1 status is now: NodeHasSufficientMemory",
			"Node/n1 Normal NodeHasNoDiskPressure: Node n1 status is now: NodeHasNoDiskPressure",
			"Node/n1 Normal NodeHasSufficientPID: Node n1 status is now: NodeHasSufficientPID",
			"Node/n1 Normal NodeReady: Node n1 status is now: NodeReady",
		}
		if diff := cmp.Diff(want, rec.take()); diff != "" {
			t.Errorf("events at registration (-want +got):\n%s", diff)
		}
		mu.Lock()
		pressure = []v1.NodeConditionType{v1.NodeMemoryPressure}
		mu.Unlock()
		time.Sleep(node.DefaultStatusUpdateFrequency)
		synctest.Wait()
		n = getNode(t, c)
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeMemoryPressure && (cond.Status != v1.ConditionTrue || cond.Reason != "KubeletHasInsufficientMemory") {
				t.Errorf("MemoryPressure = %+v", cond)
			}
		}
		want = []string{"Node/n1 Normal NodeHasInsufficientMemory: Node n1 status is now: NodeHasInsufficientMemory"}
		if diff := cmp.Diff(want, rec.take()); diff != "" {
			t.Errorf("events under pressure (-want +got):\n%s", diff)
		}
		stop()
	})
}
