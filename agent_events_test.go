package nodekit_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentEvents: the agent's parts record the pod lifecycle events on
// the recorder it is given, FailedMount included.
func TestAgentEvents(t *testing.T) {
	got := recordedEvents(t, nil)
	for _, want := range []string{
		"Normal Pulled Container image \"busybox\" already present on machine and can be accessed by the pod",
		"Normal Created Created container: c0",
		"Normal Started Started container c0",
		"Warning FailedMount Unable to attach or mount volumes",
	} {
		found := false
		for _, e := range got {
			found = found || strings.HasPrefix(e, want)
		}
		if !found {
			t.Errorf("no event %q in %q", want, got)
		}
	}
}

// TestAgentEventFilter: with WarningEvents as the filter, the Warning
// events reach the recorder and the Normal ones do not.
func TestAgentEventFilter(t *testing.T) {
	got := recordedEvents(t, events.Warnings)
	if len(got) == 0 {
		t.Fatal("no event recorded, want the FailedMount warning")
	}
	for _, e := range got {
		if !strings.HasPrefix(e, "Warning FailedMount ") {
			t.Errorf("event %q passed the WarningEvents filter", e)
		}
	}
}

// recordedEvents runs an agent with the event filter on two pods, one
// that starts and one whose volume cannot be mounted, and returns the
// events it recorded in their first 5 s.
func recordedEvents(t *testing.T, filter func(eventtype, reason string) bool) []string {
	var got []string
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		rec := record.NewFakeRecorder(1000)
		src := make(chanSource, 1)
		startAgent(t, rt, nodekit.Options{Events: rec, EventFilter: filter, Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		good := testPod("good", v1.RestartPolicyAlways, nil, "sleep 3600")
		bad := testPod("bad", v1.RestartPolicyAlways, nil, "sleep 3600")
		bad.Spec.Volumes = []v1.Volume{{Name: "x", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}}
		bad.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "x", MountPath: "/x"}}
		src <- []*v1.Pod{good, bad}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
	})
	return got
}
