package podruntime_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestPodStatusFromEventMatchesRead folds the runtime's events of a pod
// with PodStatusFromEvent, reading the pod only for the events it refuses,
// while the pod runs an init container, crashes, restarts and gets a new
// sandbox; after every second the folded status equals a read of the pod
// with GetPodStatus.
func TestPodStatusFromEventMatchesRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		pod := newPod("fold", v1.RestartPolicyAlways)
		pod.Spec.InitContainers = []v1.Container{container("setup", "sleep 1.5; exit 0")}
		pod.Spec.Containers = []v1.Container{container("app", "sleep 2.5; exit 1"), container("web", "sleep infinity")}
		a := newAgent(t, rt, pod)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		events := make(chan *runtimeapi.ContainerEventResponse, 1000)
		go rt.GetContainerEvents(ctx, events, nil)
		synctest.Wait()

		var folded *runtime.PodStatus
		fromEvents, reads := 0, 0
		fold := func() {
			for {
				select {
				case ev := <-events:
					if st, ok := a.m.PodStatusFromEvent(folded, ev); ok {
						folded = st
						fromEvents++
						continue
					}
					// Refused: a deletion, or an event older than the
					// status folded so far (read for a deletion after it).
					if ev.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT &&
						(folded == nil || folded.TimeStamp.Before(time.Unix(0, ev.GetCreatedAt()))) {
						t.Errorf("refused %s of %s, which carries its sandbox (%d containers)", ev.GetContainerEventType(), ev.GetContainerId(), len(ev.GetContainersStatuses()))
					}
					st, err := a.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
					if err != nil {
						t.Fatal(err)
					}
					folded = st
					reads++
				default:
					return
				}
			}
		}
		opts := cmp.Options{protocmp.Transform(), cmpopts.IgnoreFields(runtime.PodStatus{}, "TimeStamp")}
		check := func(when string) {
			t.Helper()
			synctest.Wait()
			fold()
			want, err := a.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, folded, opts); diff != "" {
				t.Fatalf("%s: status from events differs from a read (-read +events):\n%s", when, diff)
			}
		}
		for sec := range 12 {
			a.tick()
			check(fmt.Sprintf("second %d", sec))
			time.Sleep(time.Second)
		}
		// A new sandbox: the old one and its containers stay in the status.
		st, err := a.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StopPodSandbox(t.Context(), st.SandboxStatuses[0].GetId()); err != nil {
			t.Fatal(err)
		}
		check("sandbox stopped")
		for range 4 {
			a.tick()
			check("after a new sandbox")
			time.Sleep(time.Second)
		}
		if got := folded.SandboxStatuses; len(got) != 2 {
			t.Errorf("%d sandboxes in the folded status, want 2", len(got))
		}
		if fromEvents == 0 {
			t.Error("no status from events")
		}
		t.Logf("%d statuses from events, %d reads", fromEvents, reads)
	})
}
