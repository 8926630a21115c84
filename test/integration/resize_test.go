package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func requirements(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	return v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
	}
}

// patchResize asks for new resources of the pod's container c through the
// resize subresource.
func patchResize(t *testing.T, c kubernetes.Interface, pod *v1.Pod, r v1.ResourceRequirements) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": "c", "resources": r}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
		t.Fatalf("patching the resize subresource of %s: %v", pod.Name, err)
	}
}

// resizeState summarizes what the API server's status says of a resize:
// the resize conditions, the container's allocated requests and its
// reported limits.
func resizeState(t *testing.T, c kubernetes.Interface, pod *v1.Pod) (conds []string, alloc, limits v1.ResourceList, err error) {
	got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, cond := range got.Status.Conditions {
		if cond.Type == v1.PodResizePending || cond.Type == v1.PodResizeInProgress {
			conds = append(conds, fmt.Sprintf("%s %s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message))
		}
	}
	if len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Running == nil {
		return conds, nil, nil, fmt.Errorf("container not running: %+v", got.Status.ContainerStatuses)
	}
	cs := got.Status.ContainerStatuses[0]
	if cs.Resources == nil {
		return conds, cs.AllocatedResources, nil, fmt.Errorf("no resources in the container status")
	}
	return conds, cs.AllocatedResources, cs.Resources.Limits, nil
}

func sameResources(want, got v1.ResourceList) error {
	for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		w, g := want[n], got[n]
		if w.Cmp(g) != 0 {
			return fmt.Errorf("%s %s, want %s", n, g.String(), w.String())
		}
	}
	return nil
}

// startResizeAgent runs an agent named nodeName on the in-memory runtime
// (8 cpus, 16Gi), joined to the API server, until the test ends, and
// waits for its Node to be Ready.
func startResizeAgent(t *testing.T, c kubernetes.Interface, nodeName string) {
	t.Helper()
	cleanupNode(t, c, nodeName)
	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     clientset.From(client(t)),
		Runtime:        rt,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)
	eventually(t, 30*time.Second, "the Node Ready", func() error { return nodeReady(t.Context(), c, nodeName) })
}

// TestResizeSubresource runs the agent on the in-memory runtime, joined
// to the real API server, and resizes a pod through the API server's
// resize subresource: the allocatedResources and resources of its status
// follow and no resize condition stays; a resize beyond the node's
// allocatable resources is refused by the API server itself; one that
// does not fit beside another pod gets PodResizePending/Deferred with the
// kubelet's message, the allocation unchanged, until the other pod is
// deleted: then it is allocated and done. The events are the kubelet's
// ResizeDeferred, ResizeStarted and ResizeCompleted, with its messages.
func TestResizeSubresource(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("resize")
	startResizeAgent(t, c, nodeName)

	initial := requirements("500m", "1", "64Mi", "128Mi")
	p := newPod(uniqueName("resize"), nodeName)
	p.Spec.Containers[0].Resources = initial
	pod := createPod(t, c, p)
	want := func(r v1.ResourceRequirements, wantConds ...string) func() error {
		return func() error {
			conds, alloc, limits, err := resizeState(t, c, pod)
			if err != nil {
				return err
			}
			if len(conds) != len(wantConds) {
				return fmt.Errorf("resize conditions %q, want %q", conds, wantConds)
			}
			for i := range conds {
				if !strings.HasPrefix(conds[i], wantConds[i]) {
					return fmt.Errorf("resize conditions %q, want %q", conds, wantConds)
				}
			}
			if err := sameResources(r.Requests, alloc); err != nil {
				return fmt.Errorf("allocatedResources: %w", err)
			}
			if err := sameResources(r.Limits, limits); err != nil {
				return fmt.Errorf("resources.limits: %w", err)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the pod running with its resources in the status", want(initial))

	bigger := requirements("1", "2", "128Mi", "256Mi")
	patchResize(t, c, pod, bigger)
	eventually(t, 30*time.Second, "the resize shown in the status", want(bigger))

	// Beyond the node's allocatable resources: the API server itself
	// refuses it (1.37), before the agent sees it.
	huge, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": "c", "resources": requirements("100", "100", "128Mi", "256Mi")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, huge, metav1.PatchOptions{}, "resize"); err == nil {
		t.Errorf("the API server accepted a resize beyond the node's allocatable resources")
	}

	other := newPod(uniqueName("other"), nodeName)
	other.Spec.Containers[0].Resources = requirements("6", "6", "64Mi", "64Mi")
	createPod(t, c, other)
	eventually(t, 30*time.Second, "the other pod running", func() error {
		got, err := c.CoreV1().Pods(other.Namespace).Get(t.Context(), other.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		return nil
	})
	deferred := requirements("3", "3", "128Mi", "256Mi")
	patchResize(t, c, pod, deferred)
	eventually(t, 30*time.Second, "PodResizePending Deferred", want(bigger,
		"PodResizePending True Deferred: Node didn't have enough resource: cpu, requested: 3000, used: 6000, capacity: 8000"))
	events := func(reasons ...string) func() error {
		return func() error {
			evs, err := c.CoreV1().Events(pod.Namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
			if err != nil {
				return err
			}
			seen := map[string]string{}
			for _, e := range evs.Items {
				seen[e.Reason] = e.Message
			}
			for _, r := range reasons {
				want := map[string]string{
					"ResizeDeferred":  `Pod resize Deferred: {"containers":[{"name":"c","resources":{"limits":{"cpu":"3","memory":"256Mi"},"requests":{"cpu":"3","memory":"128Mi"}}}],"generation":3,"error":"Node didn't have enough resource: cpu, requested: 3000, used: 6000, capacity: 8000"}`,
					"ResizeStarted":   `Pod resize started: {"containers":[{"name":"c","resources":{"limits":{"cpu":"3","memory":"256Mi"},"requests":{"cpu":"3","memory":"128Mi"}}}],"generation":3}`,
					"ResizeCompleted": `Pod resize completed: {"containers":[{"name":"c","resources":{"limits":{"cpu":"3","memory":"256Mi"},"requests":{"cpu":"3","memory":"128Mi"}}}],"generation":3}`,
				}[r]
				if seen[r] != want {
					return fmt.Errorf("event %s: %q, want %q", r, seen[r], want)
				}
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the ResizeDeferred event", events("ResizeDeferred"))

	// The other pod deleted, its room is free: the deferred resize is
	// retried and allocated.
	zero := int64(0)
	if err := c.CoreV1().Pods(other.Namespace).Delete(t.Context(), other.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the deferred resize done", want(deferred))
	eventually(t, 30*time.Second, "the ResizeStarted and ResizeCompleted events", events("ResizeStarted", "ResizeCompleted"))
}
