package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// TestOfflineRestart: an agent runs two API pods; it stops, one of the
// pods is deleted in the API server, and the API server stops. A new agent
// on the same RootDir and runtime, started while the API server is down,
// keeps both pods running from its checkpoint (same containers, no
// restart, no new sandbox: it cannot confirm the deletion) through its
// housekeeping, and manages them: a container killed meanwhile is
// restarted. When the API server is back, the agent reconciles: the
// deleted pod is stopped and removed from the API server, the other keeps
// its container and is Running there.
func TestOfflineRestart(t *testing.T) {
	srv := startAPIServer(t)
	c := newClient(t, srv.kubeconfig())
	nodeName := uniqueName("offline")
	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	rootDir := t.TempDir()
	logsDir := t.TempDir()
	newAgent := func(name string, client kubernetes.Interface) *nodekit.Agent {
		a, err := nodekit.New(nodekit.Options{
			NodeName:       nodeName,
			KubeClient:     clientset.From(client),
			Runtime:        rt,
			RootDir:        rootDir,
			RuntimeManager: podruntime.Options{PodLogsDir: logsDir},
			Cgroups:        cgroup.PodManagerOptions{Disabled: true},
			APISource:      apiserver.Options{MaxRetryInterval: 2 * time.Second},
			Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName(name),
			Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	running := func() map[types.UID][]string {
		cs, err := rt.ListContainers(t.Context(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[types.UID][]string{}
		for _, ct := range cs {
			uid := types.UID(ct.Labels[runtime.LabelPodUID])
			out[uid] = append(out[uid], ct.Id)
		}
		for _, ids := range out {
			slices.Sort(ids)
		}
		return out
	}
	sandboxes := func() int {
		sbs, err := rt.ListPodSandbox(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(sbs)
	}

	stop1 := runInBackground(t, "agent 1", newAgent("agent-1", newClient(t, srv.kubeconfig())).Run)
	keep := newPod(uniqueName("keep"), nodeName)
	keep.Spec.Containers[0].Command = []string{"sleep", "3600"}
	gone := newPod(uniqueName("gone"), nodeName)
	gone.Spec.Containers[0].Command = []string{"sleep", "3600"}
	keep, gone = createPod(t, c, keep), createPod(t, c, gone)
	eventually(t, 30*time.Second, "both pods Running in the API server", func() error {
		for _, p := range []*v1.Pod{keep, gone} {
			got, err := c.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != v1.PodRunning {
				return fmt.Errorf("%s is %s", p.Name, got.Status.Phase)
			}
		}
		return nil
	})
	before := running()
	sandboxesBefore := sandboxes()
	if len(before[keep.UID]) != 1 || len(before[gone.UID]) != 1 {
		t.Fatalf("running containers %v, want one for each pod", before)
	}
	stop1()

	// Deleted while no agent runs: graceful, so it stays with a
	// deletionTimestamp until an agent finishes it.
	if err := c.CoreV1().Pods(gone.Namespace).Delete(t.Context(), gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.stop()

	stop2 := runInBackground(t, "agent 2", newAgent("agent-2", newClient(t, srv.kubeconfig())).Run)
	// Past the checkpoint's grace and several housekeeping passes.
	time.Sleep(apiserver.DefaultCheckpointGrace + 10*time.Second)
	offline := running()
	for _, p := range []*v1.Pod{keep, gone} {
		if !slices.Equal(offline[p.UID], before[p.UID]) {
			t.Errorf("%s: running containers %v while the API server is down, want %v unchanged", p.Name, offline[p.UID], before[p.UID])
		}
	}
	if n := sandboxes(); n != sandboxesBefore {
		t.Errorf("%d sandboxes while the API server is down, want %d", n, sandboxesBefore)
	}
	// The agent manages the checkpoint's pods, not merely leaves them be:
	// a container that dies is restarted (restartPolicy Always).
	if err := rt.StopContainer(t.Context(), before[keep.UID][0], 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, keep.Name+"'s container restarted while the API server is down", func() error {
		if ids := running()[keep.UID]; len(ids) != 1 || ids[0] == before[keep.UID][0] {
			return fmt.Errorf("running containers %v", ids)
		}
		return nil
	})
	restarted := running()[keep.UID]

	srv.restart()
	up := time.Now()
	eventually(t, 60*time.Second, gone.Name+" deleted from the API server", func() error {
		_, err := c.CoreV1().Pods(gone.Namespace).Get(t.Context(), gone.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s still there", gone.Name)
	})
	t.Logf("the pod deleted during the outage was finished %v after the API server came back", time.Since(up).Round(100*time.Millisecond))
	eventually(t, 30*time.Second, keep.Name+" Running in the API server", func() error {
		got, err := c.CoreV1().Pods(keep.Namespace).Get(t.Context(), keep.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != v1.PodRunning {
			return fmt.Errorf("%s is %s", keep.Name, got.Status.Phase)
		}
		return nil
	})
	after := running()
	if len(after[gone.UID]) != 0 {
		t.Errorf("%s still has running containers %v", gone.Name, after[gone.UID])
	}
	if !slices.Equal(after[keep.UID], restarted) {
		t.Errorf("%s: running containers %v after the reconciliation, want %v (no restart)", keep.Name, after[keep.UID], restarted)
	}
	stop2()
}
