package nodekit_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func execProbe(period, failures int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds:    period,
		FailureThreshold: failures,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
	}
}

func podCondition(s v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// TestAgentLivenessProbe: a liveness probe that starts failing gets the
// container restarted, with its restart count incremented.
func TestAgentLivenessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		// The first container becomes unhealthy once sick holds its ID;
		// its replacement stays healthy.
		var sick atomic.Value
		sick.Store("")
		rt.SetExecHandler(func(id string, _ []string) ([]byte, []byte, int32) {
			if id != sick.Load().(string) {
				return nil, nil, 0
			}
			return nil, []byte("cat: /tmp/healthy: No such file or directory"), 1
		})
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		pod := testPod("live", v1.RestartPolicyAlways, nil, "sleep 3600")
		pod.Spec.Containers[0].LivenessProbe = execProbe(2, 3)
		src <- []*v1.Pod{pod}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		s, _ := h.status("default/live")
		if !h.running("default/live") || s.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("healthy container: running %v, status %+v", h.running("default/live"), s.ContainerStatuses)
		}
		first := s.ContainerStatuses[0].ContainerID

		sick.Store(first[strings.Index(first, "://")+3:])
		// Three failures 2s apart, then the kill and the restart.
		time.Sleep(20 * time.Second)
		synctest.Wait()
		s, _ = h.status("default/live")
		c := s.ContainerStatuses[0]
		if c.RestartCount != 1 || c.ContainerID == first || c.State.Running == nil {
			t.Errorf("after the liveness failure: restart count %d, container %s (first %s), state %+v; want restarted once and running", c.RestartCount, c.ContainerID, first, c.State)
		}
	})
}

// TestAgentReadinessProbe: the pod's Ready condition follows a flapping
// readiness probe.
func TestAgentReadinessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		var ready atomic.Bool
		rt.SetExecHandler(func(string, []string) ([]byte, []byte, int32) {
			if ready.Load() {
				return nil, nil, 0
			}
			return nil, nil, 1
		})
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		pod := testPod("ready", v1.RestartPolicyAlways, nil, "sleep 3600")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
		src <- []*v1.Pod{pod}

		for i, want := range []bool{false, true, false, true} {
			ready.Store(want)
			time.Sleep(10 * time.Second)
			synctest.Wait()
			s, _ := h.status("default/ready")
			wantCond := v1.ConditionFalse
			if want {
				wantCond = v1.ConditionTrue
			}
			if got := podCondition(s, v1.PodReady); got != wantCond {
				t.Errorf("step %d: probe ready=%v, pod Ready = %q, want %q", i, want, got, wantCond)
			}
			if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].Ready != want {
				t.Errorf("step %d: container statuses %+v, want ready=%v", i, s.ContainerStatuses, want)
			}
		}
		if s, _ := h.status("default/ready"); s.ContainerStatuses[0].RestartCount != 0 {
			t.Error("a readiness failure restarted the container")
		}
	})
}

// TestAgentStartupProbe: liveness is not probed until the startup probe
// succeeds, so a slow start is not killed.
func TestAgentStartupProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		var started atomic.Bool
		var livenessCalls atomic.Int32
		rt.SetExecHandler(func(_ string, cmd []string) ([]byte, []byte, int32) {
			switch cmd[len(cmd)-1] {
			case "/tmp/started":
				if started.Load() {
					return nil, nil, 0
				}
				return nil, nil, 1
			default: // liveness: fails until started
				livenessCalls.Add(1)
				if started.Load() {
					return nil, nil, 0
				}
				return nil, nil, 1
			}
		})
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		pod := testPod("slow", v1.RestartPolicyAlways, nil, "sleep 3600")
		startup := execProbe(1, 60)
		startup.Exec.Command = []string{"cat", "/tmp/started"}
		pod.Spec.Containers[0].StartupProbe = startup
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
		src <- []*v1.Pod{pod}

		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := livenessCalls.Load(); n != 0 {
			t.Errorf("liveness probed %d times before startup succeeded", n)
		}
		s, _ := h.status("default/slow")
		if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].RestartCount != 0 || *s.ContainerStatuses[0].Started {
			t.Fatalf("before startup: statuses %+v, want not started and never restarted", s.ContainerStatuses)
		}
		started.Store(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		s, _ = h.status("default/slow")
		if livenessCalls.Load() == 0 || !*s.ContainerStatuses[0].Started || s.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("after startup: liveness calls %d, statuses %+v; want liveness running, started, no restart", livenessCalls.Load(), s.ContainerStatuses)
		}
	})
}
