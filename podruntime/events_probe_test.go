package podruntime_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	nkstatus "github.com/nodekit/nodekit/status"
)

// TestLivenessFailureEvents wires the probe manager to the runtime manager
// as the agent does, with one recorder: a container that fails its
// liveness probe gets the probe's Unhealthy events, then a Killing event
// naming the probe, then is started again.
func TestLivenessFailureEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		rec := record.NewFakeRecorder(100)

		var (
			mu       sync.Mutex
			statuses = map[types.UID]v1.PodStatus{}
		)
		pm, err := probe.NewManager(func(uid types.UID) (v1.PodStatus, bool) {
			mu.Lock()
			defer mu.Unlock()
			s, ok := statuses[uid]
			return *s.DeepCopy(), ok
		}, probe.Options{
			Prober: probe.ProberFunc(func(context.Context, probe.Request) (probe.Result, string, error) {
				return probe.Failure, "HTTP probe failed with statuscode: 500", nil
			}),
			Recorder: rec,
			Logger:   testr.New(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := podruntime.New(rt, rt, podruntime.Options{
			Logger:     testr.New(t),
			PodLogsDir: t.TempDir(),
			Recorder:   rec,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { _ = pm.Run(ctx) })
		defer func() {
			cancel()
			wg.Wait()
		}()

		pod := newPod("live", v1.RestartPolicyAlways)
		pod.Spec.Containers = []v1.Container{container("app", "sleep infinity")}
		pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz"}},
			PeriodSeconds: 1, FailureThreshold: 3,
		}
		pm.AddPod(pod)

		var got []string
		for range 10 {
			st, err := m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			m.SyncPodWithOptions(t.Context(), pod, st, podruntime.SyncPodOptions{Unhealthy: pm.Unhealthy})
			if st, err = m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace); err != nil {
				t.Fatal(err)
			}
			api := nkstatus.Generate(nkstatus.Input{Pod: pod, Runtime: st, RuntimeName: m.RuntimeName(), Waiting: m, Probes: pm})
			mu.Lock()
			statuses[pod.UID] = api
			mu.Unlock()
			got = append(got, drainEvents(rec)...)
			if api.ContainerStatuses[0].RestartCount == 1 {
				break
			}
			// The probes of the next second; one due at the same instant
			// as the next sync runs before it.
			time.Sleep(time.Second)
			synctest.Wait()
			got = append(got, drainEvents(rec)...)
		}
		pulled := `Normal Pulled Container image "busybox:1.36" already present on machine and can be accessed by the pod`
		unhealthy := "Warning Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 500"
		want := []string{
			pulled, "Normal Created Created container: app", "Normal Started Started container app",
			unhealthy, unhealthy, unhealthy,
			"Normal Killing Container app failed liveness probe, will be restarted",
			pulled, "Normal Created Created container: app", "Normal Started Started container app",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

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
