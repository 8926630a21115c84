package probe

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Any client-go recorder is an EventRecorder.
var _ EventRecorder = record.EventRecorder(nil)

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestUnhealthyEvents(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		script  []Result
		err     error
		started bool
		want    []string
	}{{
		name:    "each liveness failure until the threshold, then none while held",
		typ:     Liveness,
		script:  []Result{Failure},
		started: true,
		want: []string{
			"Warning Unhealthy Liveness probe failed: output",
			"Warning Unhealthy Liveness probe failed: output",
			"Warning Unhealthy Liveness probe failed: output",
		},
	}, {
		name:    "every readiness failure",
		typ:     Readiness,
		script:  []Result{Failure, Success, Failure, Failure, Failure, Failure},
		started: true,
		want: []string{
			"Warning Unhealthy Readiness probe failed: output",
			"Warning Unhealthy Readiness probe failed: output",
			"Warning Unhealthy Readiness probe failed: output",
			"Warning Unhealthy Readiness probe failed: output",
			"Warning Unhealthy Readiness probe failed: output",
		},
	}, {
		name:   "startup failures",
		typ:    Startup,
		script: []Result{Failure, Failure, Success},
		want: []string{
			"Warning Unhealthy Startup probe failed: output",
			"Warning Unhealthy Startup probe failed: output",
		},
	}, {
		name:    "a success with a warning records ProbeWarning each time",
		typ:     Readiness,
		script:  []Result{Warning},
		started: true,
		want: []string{
			"Warning ProbeWarning Readiness probe warning: output",
			"Warning ProbeWarning Readiness probe warning: output",
			"Warning ProbeWarning Readiness probe warning: output",
			"Warning ProbeWarning Readiness probe warning: output",
			"Warning ProbeWarning Readiness probe warning: output",
			"Warning ProbeWarning Readiness probe warning: output",
		},
	}, {
		name:    "a liveness warning is no failure: never held",
		typ:     Liveness,
		script:  []Result{Warning, Failure, Warning},
		started: true,
		want: []string{
			"Warning ProbeWarning Liveness probe warning: output",
			"Warning Unhealthy Liveness probe failed: output",
			"Warning ProbeWarning Liveness probe warning: output",
			"Warning ProbeWarning Liveness probe warning: output",
			"Warning ProbeWarning Liveness probe warning: output",
			"Warning ProbeWarning Liveness probe warning: output",
		},
	}, {
		name:    "successes record nothing",
		typ:     Liveness,
		script:  []Result{Success},
		started: true,
	}, {
		name:    "an Unknown result without an error counts as a failure but records nothing",
		typ:     Readiness,
		script:  []Result{Unknown},
		started: true,
	}, {
		name:    "a probe that cannot run, once per period",
		typ:     Liveness,
		err:     errors.New("no such port"),
		started: true,
		want: []string{
			"Warning Unhealthy Liveness probe errored and resulted in unknown state: no such port",
			"Warning Unhealthy Liveness probe errored and resulted in unknown state: no such port",
			"Warning Unhealthy Liveness probe errored and resulted in unknown state: no such port",
			"Warning Unhealthy Liveness probe errored and resulted in unknown state: no such port",
			"Warning Unhealthy Liveness probe errored and resulted in unknown state: no such port",
			"Warning Unhealthy Liveness probe errored and resulted in unknown state: no such port",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := record.NewFakeRecorder(100)
				h := newHarness(t, func(o *Options) { o.Recorder = rec })
				stop := h.run()
				defer stop()
				settle(time.Minute)

				probes := map[Type]*v1.Probe{tt.typ: execProbe(nil)}
				pod := testPod("p1", probes[Liveness], probes[Readiness], probes[Startup])
				h.setStatus(pod, runningStatus("c1", time.Now(), tt.started))
				h.setScript(tt.typ, tt.script...)
				h.errs[tt.typ] = tt.err
				h.m.AddPod(pod)
				// Probes at 0s, 1s, ... 5s.
				settle(5500 * time.Millisecond)
				if diff := cmp.Diff(tt.want, drainEvents(rec)); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// refs records the objects events are recorded on.
type refs struct {
	mu  sync.Mutex
	got []v1.ObjectReference
}

func (r *refs) Event(obj apiruntime.Object, _, _, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, *obj.(*v1.ObjectReference))
}

func TestUnhealthyEventObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &refs{}
		h := newHarness(t, func(o *Options) { o.Recorder = r })
		stop := h.run()
		defer stop()
		settle(time.Minute)

		always := v1.ContainerRestartPolicyAlways
		pod := testPod("p1", nil, execProbe(nil), nil)
		pod.ResourceVersion = "7"
		pod.Spec.InitContainers = []v1.Container{{Name: "sidecar", RestartPolicy: &always, ReadinessProbe: execProbe(func(p *v1.Probe) { p.PeriodSeconds = 1 })}}
		st := runningStatus("c1", time.Now(), true)
		st.InitContainerStatuses = []v1.ContainerStatus{{
			Name: "sidecar", ContainerID: "fake://side", Started: boolp(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}}
		h.setStatus(pod, st)
		h.setScript(Readiness, Failure)
		h.m.AddPod(pod)
		settle(500 * time.Millisecond)

		ref := func(path string) v1.ObjectReference {
			return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "pod-p1", UID: "p1", ResourceVersion: "7", FieldPath: path}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		got := map[string]v1.ObjectReference{}
		for _, o := range r.got {
			got[o.FieldPath] = o
		}
		want := map[string]v1.ObjectReference{
			"spec.containers{app}":         ref("spec.containers{app}"),
			"spec.initContainers{sidecar}": ref("spec.initContainers{sidecar}"),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("objects of the events (-want +got):\n%s", diff)
		}
	})
}

// TestProbeWarningIsSuccess: a readiness probe that succeeds with a
// warning makes the container ready; Warning is never published nor
// reported to Metrics.
func TestProbeWarningIsSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)

		pod := testPod("p1", nil, execProbe(nil), nil)
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.setScript(Readiness, Warning)
		h.m.AddPod(pod)
		settle(2500 * time.Millisecond)
		h.mu.Lock()
		defer h.mu.Unlock()
		if diff := cmp.Diff(map[Type]map[Result]int{Readiness: {Success: 3}}, h.metrics); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		var got []Result
		for _, u := range h.updates {
			got = append(got, u.Result)
		}
		// The initial readiness result, then the probe's.
		if diff := cmp.Diff([]Result{Failure, Success}, got); diff != "" {
			t.Errorf("published results (-want +got):\n%s", diff)
		}
	})
}
