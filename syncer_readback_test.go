package nodekit_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentReadsPodBackAfterStart: a pod's status shows its containers
// running as soon as the sync that started them returned, without waiting
// for the PLEG (which relists here once a minute), and reading it back
// lists neither its sandboxes nor its containers: two status calls, one
// for the sandbox and one for the container it started.
func TestAgentReadsPodBackAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
			PLEG: func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
				return pleg.NewGeneric(rt, st, c, pleg.GenericOptions{RelistPeriod: time.Minute, Logger: log})
			},
		})
		time.Sleep(time.Second) // the first relist, and the agent settles
		synctest.Wait()
		lists := rt.Calls("ListPodSandbox") + rt.Calls("ListContainers")
		sandboxStatuses, containerStatuses := rt.Calls("PodSandboxStatus"), rt.Calls("ContainerStatus")

		src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600")}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !h.running("default/a") {
			s, _ := h.status("default/a")
			t.Fatalf("pod not running 100ms after it was given, before any relist: phase %s, containers %+v", s.Phase, s.ContainerStatuses)
		}
		if n := rt.Calls("ListPodSandbox") + rt.Calls("ListContainers") - lists; n != 0 {
			t.Errorf("%d list calls for the start, want 0", n)
		}
		// One sandbox status after its creation (for its IPs), one to
		// read the pod back; one container status to read it back.
		if n := rt.Calls("PodSandboxStatus") - sandboxStatuses; n != 2 {
			t.Errorf("%d PodSandboxStatus calls for the start, want 2", n)
		}
		if n := rt.Calls("ContainerStatus") - containerStatuses; n != 1 {
			t.Errorf("%d ContainerStatus calls for the start, want 1", n)
		}
	})
}
