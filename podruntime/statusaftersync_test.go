package podruntime_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestPodStatusAfterSyncMatchesRead syncs a pod once a second through its
// life (an init container, a crashing app container, its pruned exited
// instances, a new sandbox), reading it back after every sync that did
// something with PodStatusAfterSync: each status equals a read with
// GetPodStatus made right after, and no read back lists the runtime.
func TestPodStatusAfterSyncMatchesRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		pod := newPod("after", v1.RestartPolicyAlways)
		pod.Spec.InitContainers = []v1.Container{container("setup", "sleep 1.5; exit 0")}
		pod.Spec.Containers = []v1.Container{container("app", "sleep 1.5; exit 1"), container("web", "sleep infinity")}
		a := newAgent(t, rt, pod)
		ctx := t.Context()
		opts := cmp.Options{protocmp.Transform(), cmpopts.IgnoreFields(runtime.PodStatus{}, "TimeStamp")}

		lists := func() int { return rt.Calls("ListPodSandbox") + rt.Calls("ListContainers") }
		readBacks := 0
		sync := func(when string) {
			t.Helper()
			prev, err := a.m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			res := a.m.SyncPod(ctx, pod, prev)
			if err := res.Err(); err != nil && !res.OnlyBackOff() {
				t.Fatalf("%s: SyncPod: %v", when, err)
			}
			l0 := lists()
			got, ok, err := a.m.PodStatusAfterSync(ctx, pod.UID, pod.Name, pod.Namespace, prev, res)
			if err != nil {
				t.Fatalf("%s: PodStatusAfterSync: %v", when, err)
			}
			if n := lists() - l0; n != 0 {
				t.Errorf("%s: PodStatusAfterSync listed the runtime %d times", when, n)
			}
			if wantOK := len(res.Results) > 0 && (res.Err() == nil || res.OnlyBackOff()); ok != wantOK {
				t.Fatalf("%s: PodStatusAfterSync answered %v after %+v, want %v", when, ok, res.Results, wantOK)
			}
			if !ok {
				return
			}
			readBacks++
			want, err := a.m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Fatalf("%s: status after the sync differs from a read (-read +after):\n%s", when, diff)
			}
		}
		for sec := range 40 {
			sync(fmt.Sprintf("second %d", sec))
			time.Sleep(time.Second)
		}
		// A new sandbox: the old one and its containers stay in the
		// status.
		st, err := a.m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StopPodSandbox(ctx, st.SandboxStatuses[0].GetId()); err != nil {
			t.Fatal(err)
		}
		for sec := range 4 {
			sync(fmt.Sprintf("second %d after the sandbox stopped", sec))
			time.Sleep(time.Second)
		}
		st, err = a.m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.SandboxStatuses) != 2 {
			t.Errorf("%d sandboxes, want 2", len(st.SandboxStatuses))
		}
		if readBacks < 10 {
			t.Errorf("%d syncs read back, want at least 10 (start, init, app, restarts, back-offs, new sandbox)", readBacks)
		}
	})
}

// TestPodStatusAfterSyncFirstStart reads a pod back after its first
// start with two runtime calls per object it created, and none other;
// after a failed step, or without the status the sync started from, it
// reads nothing and answers false.
func TestPodStatusAfterSyncFirstStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		pod := newPod("first", v1.RestartPolicyAlways)
		pod.Spec.Containers = []v1.Container{container("app", "sleep infinity")}
		a := newAgent(t, rt, pod)
		ctx := t.Context()
		calls := func() map[string]int {
			out := map[string]int{}
			for _, m := range []string{"ListPodSandbox", "ListContainers", "PodSandboxStatus", "ContainerStatus"} {
				out[m] = rt.Calls(m)
			}
			return out
		}

		prev := &runtime.PodStatus{ID: pod.UID}
		res := a.m.SyncPod(ctx, pod, prev)
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := a.m.PodStatusAfterSync(ctx, pod.UID, pod.Name, pod.Namespace, nil, res); ok {
			t.Error("PodStatusAfterSync answered without the status the sync started from")
		}
		c0 := calls()
		st, ok, err := a.m.PodStatusAfterSync(ctx, pod.UID, pod.Name, pod.Namespace, prev, res)
		if err != nil || !ok {
			t.Fatalf("PodStatusAfterSync = %v, %v", ok, err)
		}
		c1 := calls()
		for m, want := range map[string]int{"ListPodSandbox": 0, "ListContainers": 0, "PodSandboxStatus": 1, "ContainerStatus": 1} {
			if got := c1[m] - c0[m]; got != want {
				t.Errorf("%s called %d times, want %d", m, got, want)
			}
		}
		if len(st.SandboxStatuses) != 1 || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State != runtime.ContainerStateRunning || len(st.IPs) == 0 {
			t.Errorf("status after the first start: %d sandboxes, %d containers, IPs %v; want the sandbox with its IP and the running container",
				len(st.SandboxStatuses), len(st.ContainerStatuses), st.IPs)
		}
		if st.Name != pod.Name || st.Namespace != pod.Namespace || st.ID != pod.UID {
			t.Errorf("status of %s/%s (%s), want %s/%s (%s)", st.Namespace, st.Name, st.ID, pod.Namespace, pod.Name, pod.UID)
		}

		// A failed creation may leave a container the sync does not know.
		other := newPod("failed", v1.RestartPolicyAlways)
		other.Spec.Containers = []v1.Container{container("app", "sleep infinity")}
		rt.InjectError("CreateContainer", errors.New("timed out"))
		defer rt.InjectError("CreateContainer", nil)
		res = a.m.SyncPod(ctx, other, &runtime.PodStatus{ID: other.UID})
		if res.Err() == nil {
			t.Fatal("the sync did not fail")
		}
		c0 = calls()
		if _, ok, err := a.m.PodStatusAfterSync(ctx, other.UID, other.Name, other.Namespace, &runtime.PodStatus{ID: other.UID}, res); ok || err != nil {
			t.Errorf("PodStatusAfterSync after a failed step = %v, %v; want false, nil", ok, err)
		}
		if diff := cmp.Diff(c0, calls()); diff != "" {
			t.Errorf("PodStatusAfterSync after a failed step called the runtime (-before +after):\n%s", diff)
		}
	})
}
