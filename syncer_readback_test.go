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

// TestAgentStatusFromEventsAfterStart: while the evented PLEG's events
// bring the pods' statuses, a pod's status shows its container running as
// soon as the container's events arrive, without reading the pod back:
// the start makes one status call, for the new sandbox's IPs. The first
// pod is read back: no event with statuses has arrived before its start.
func TestAgentStatusFromEventsAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		var ev *pleg.Evented
		h := startAgent(t, rt, nodekit.Options{
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
			PLEG: func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
				var err error
				ev, err = pleg.NewEvented(rt.(pleg.EventedRuntime), st, c, pleg.EventedOptions{Logger: log})
				return ev, err
			},
		})
		time.Sleep(time.Second) // the stream settles
		synctest.Wait()
		if !ev.Streaming() || ev.StreamsStatuses() {
			t.Fatalf("before any event: Streaming %v, StreamsStatuses %v; want true, false", ev.Streaming(), ev.StreamsStatuses())
		}
		src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600")}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !h.running("default/a") {
			t.Fatal("pod a not running 100ms after it was given")
		}
		if !ev.StreamsStatuses() {
			t.Fatal("StreamsStatuses false after the events of a start")
		}
		sandboxStatuses, containerStatuses := rt.Calls("PodSandboxStatus"), rt.Calls("ContainerStatus")

		src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600"), testPod("b", v1.RestartPolicyAlways, nil, "sleep 3600")}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !h.running("default/b") {
			s, _ := h.status("default/b")
			t.Fatalf("pod b not running 100ms after it was given: phase %s, containers %+v", s.Phase, s.ContainerStatuses)
		}
		if n := rt.Calls("PodSandboxStatus") - sandboxStatuses; n != 1 {
			t.Errorf("%d PodSandboxStatus calls for the start, want 1 (the new sandbox's IPs)", n)
		}
		if n := rt.Calls("ContainerStatus") - containerStatuses; n != 0 {
			t.Errorf("%d ContainerStatus calls for the start, want 0", n)
		}
	})
}

// silentPLEG says the runtime's events bring statuses, but sends none
// and relists once a minute.
type silentPLEG struct{ *pleg.Generic }

func (silentPLEG) StreamsStatuses() bool { return true }

// TestAgentReadsPodBackWithoutEvents: a sync that waits for events that
// never come reads the pod back once its wait ends, and reports its
// status then, long before the next relist; for a minute after that,
// syncs read their pods back without waiting.
func TestAgentReadsPodBackWithoutEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
			PLEG: func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
				g, err := pleg.NewGeneric(rt, st, c, pleg.GenericOptions{RelistPeriod: time.Minute, Logger: log})
				return silentPLEG{g}, err
			},
		})
		time.Sleep(time.Second) // the first relist, and the agent settles
		synctest.Wait()
		start := time.Now()
		src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600")}
		for !h.running("default/a") {
			if time.Since(start) > 30*time.Second {
				t.Fatal("pod not running 30s after it was given")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if d := time.Since(start); d < 9*time.Second || d > 11*time.Second {
			t.Errorf("pod running after %v, want after the 10s wait for its events", d)
		}
		if n := rt.Calls("ContainerStatus"); n != 1 {
			t.Errorf("%d ContainerStatus calls, want 1: the read-back", n)
		}
		if !h.logs.contains("Container events late") {
			t.Error("no log line says the events were late")
		}

		src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600"), testPod("b", v1.RestartPolicyAlways, nil, "sleep 3600")}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !h.running("default/b") {
			t.Error("pod b not running 100ms after it was given: its sync waited for events again")
		}
	})
}
