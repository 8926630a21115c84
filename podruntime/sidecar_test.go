package podruntime

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// sidecarRunningPod has sidecars s1 and s2 and app containers a and b;
// it is synced until every container runs.
func sidecarRunningPod(t *testing.T, f *fakes) *v1.Pod {
	t.Helper()
	pod := testPod("sidecars", "a", "b")
	for _, n := range []string{"s1", "s2"} {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{
			Name: n, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, RestartPolicy: ptr(v1.ContainerRestartPolicyAlways)})
	}
	var started [][]string
	for range 3 {
		res := f.sync(t, pod)
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		started = append(started, startedNames(res))
	}
	// Each sidecar starts once the one before it runs; the app containers
	// start in the sync that sees the last sidecar running.
	if diff := cmp.Diff([][]string{{"s1"}, {"s2"}, {"a", "b"}}, started); diff != "" {
		t.Fatalf("started per sync (-want +got):\n%s", diff)
	}
	return pod
}

// recordStops makes container a of pod take slow to stop and returns the
// container names by ID and the names in the order they were stopped.
func recordStops(t *testing.T, f *fakes, pod *v1.Pod, slow time.Duration) (names map[string]string, order func() []string) {
	names = map[string]string{}
	for _, c := range f.status(t, pod).ContainerStatuses {
		names[c.ID] = c.Name
	}
	var (
		mu      sync.Mutex
		stopped []string
	)
	f.rec.stopHook = func(id string) {
		if names[id] == "a" {
			time.Sleep(slow)
		}
		mu.Lock()
		stopped = append(stopped, names[id])
		mu.Unlock()
	}
	return names, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(stopped)
	}
}

func TestKillPodStopsSidecarsAfterAppContainersInReverseOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := sidecarRunningPod(t, f)
		names, order := recordStops(t, f, pod, 10*time.Second) // a takes 10s to stop
		if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"b", "a", "s2", "s1"}, order()); diff != "" {
			t.Errorf("stop order (-want +got):\n%s", diff)
		}
		timeouts := map[string]int64{}
		for id, s := range f.rec.stopTimeouts() {
			timeouts[names[id]] = s
		}
		// The sidecars waited 10s for a: their grace period shrinks by it.
		if diff := cmp.Diff(map[string]int64{"a": 30, "b": 30, "s2": 20, "s1": 20}, timeouts); diff != "" {
			t.Errorf("stop timeouts (-want +got):\n%s", diff)
		}
	})
}

func TestKillPodSidecarWaitEndsWithGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := sidecarRunningPod(t, f)
		_, order := recordStops(t, f, pod, time.Hour) // a never stops within the grace period
		grace := int64(5)
		if err := f.m.KillPod(t.Context(), pod, nil, &grace); err != nil {
			t.Fatal(err)
		}
		// Both sidecars stop when the grace period ends, before a.
		if got := order(); len(got) != 4 || got[0] != "b" || got[3] != "a" {
			t.Errorf("stop order = %v, want b, then s1 and s2, then a", got)
		}
	})
}

func TestSyncPodRestartAllContainers(t *testing.T) {
	f := newFakes(t, Options{})
	pod := withInit(testPod("restartall", "a", "b"), "i1")
	pod.Spec.InitContainers[0].ImagePullPolicy = v1.PullIfNotPresent
	pod.Spec.Containers[0].RestartPolicy = ptr(v1.ContainerRestartPolicyNever)
	pod.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{
		exitRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 7)}
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	f.exit(pod, "i1", 0)
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	f.calls()
	f.exit(pod, "a", 7)

	res := f.m.SyncPodWithOptions(t.Context(), pod, f.status(t, pod), SyncPodOptions{RestartAllContainers: true})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if !res.RemovedContainers() {
		t.Error("RemovedContainers = false after a reset")
	}
	if diff := cmp.Diff([]string{"StopContainer", "RemoveContainer", "RemoveContainer", "RemoveContainer"}, f.calls()); diff != "" {
		t.Errorf("reset calls (-want +got):\n%s", diff)
	}
	if n := len(f.status(t, pod).ContainerStatuses); n != 0 {
		t.Fatalf("%d containers left after the reset", n)
	}
	// The next sync starts the pod over in the same sandbox: init first.
	res = f.sync(t, pod)
	if diff := cmp.Diff([]string{"i1"}, startedNames(res)); diff != "" {
		t.Errorf("started after the reset (-want +got):\n%s", diff)
	}
	if got := len(f.status(t, pod).SandboxStatuses); got != 1 {
		t.Errorf("%d sandboxes, want the same one", got)
	}
}
