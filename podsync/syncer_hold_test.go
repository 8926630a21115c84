package podsync

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
	"github.com/nodekit/nodekit/volume"
)

// TestPodStartIsOneStatusWrite: a pod start whose sync takes longer than
// the status manager's write delay (a loaded machine, a slow runtime)
// writes one status, Running, not Pending first.
func TestPodStartIsOneStatusWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		dir := t.TempDir()
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p", ResourceVersion: "1",
				Annotations: map[string]string{sources.AnnotationSource: sources.APIServerSource}},
			Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{
				Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"},
			}}},
			Status: v1.PodStatus{Phase: v1.PodPending},
		}
		sources.SetDefaults(pod)
		api := statustest.NewFakeAPI(pod.DeepCopy())
		pod = api.Pod("default", "p")

		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		rm, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: filepath.Join(dir, "logs")})
		if err != nil {
			t.Fatal(err)
		}
		// The runtime takes 500ms to start the pod: five write delays.
		crt := &countingPodRuntime{Manager: rm, during: func() { time.Sleep(500 * time.Millisecond) }}
		statuses := status.NewManager(status.Options{Client: clientset.From(api), NodeName: "n1", Logger: testr.New(t)})
		volumes, err := volume.NewManager(dir, volume.Options{})
		if err != nil {
			t.Fatal(err)
		}
		probes, err := probe.NewManager(statuses.GetPodStatus, probe.Options{Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		cgroups, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Disabled: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{
			Runtime: crt, Volumes: volumes, Cgroups: cgroups, Probes: probes,
			Statuses: statuses, Cache: pleg.NewCache(), Queue: podworker.NewQueue(),
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{}, 2)
		go func() { _ = volumes.Run(rctx); done <- struct{}{} }()
		go func() { _ = statuses.Run(rctx); done <- struct{}{} }()
		defer func() { stop(); <-done; <-done }()
		volumes.AddPod(pod)

		if _, err := s.SyncPod(ctx, podworker.SyncPodCreate, pod, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := api.PodActions("patch")
		if len(got) != 1 {
			t.Errorf("%d status PATCHes for one pod start, want 1", len(got))
		}
		if p := api.Pod("default", "p"); p.Status.Phase != v1.PodRunning {
			t.Errorf("stored phase %s, want Running", p.Status.Phase)
		}
	})
}
