package events_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubeclient/clientset"
)

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + "name"}}
}

// One Broadcaster records the events of several agents, each as its own
// broadcaster would: from the kubelet on its own host.
func TestBroadcasterRecordsEachAgentsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		b := events.NewBroadcaster(clientset.From(cs), logr.Discard())
		a, c := b.Recorder("node-a"), b.Recorder("node-c")
		a.Event(pod("early"), v1.EventTypeWarning, "Dropped", "before Run") // dropped: not running
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- b.Run(ctx) }()
		synctest.Wait()

		// Through an agent's filtering Recorder, as the agent sets it.
		ra := events.NewRecorder(events.Warnings)
		ra.Set(a)
		ra.Event(pod("p1"), v1.EventTypeWarning, "BackOff", "back-off restarting")
		ra.Event(pod("p1"), v1.EventTypeNormal, "Started", "filtered out")
		c.Event(pod("p2"), v1.EventTypeNormal, "Pulled", "pulled")
		synctest.Wait()

		list, err := cs.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Source.Component+"/"+e.Source.Host+"/"+e.InvolvedObject.Name+"/"+e.Reason)
		}
		slices.Sort(got)
		want := []string{"kubelet/node-a/p1/BackOff", "kubelet/node-c/p2/Pulled"}
		if !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		// Stopped: dropped, and nothing left running in the bubble.
		c.Event(pod("p3"), v1.EventTypeNormal, "Pulled", "after Run")
	})
}
