package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func createRuntimeClass(t *testing.T, c kubernetes.Interface, rc *nodev1.RuntimeClass) {
	t.Helper()
	if _, err := c.NodeV1().RuntimeClasses().Create(t.Context(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RuntimeClass %s: %v", rc.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.NodeV1().RuntimeClasses().Delete(ctx, rc.Name, metav1.DeleteOptions{})
	})
}

// TestRuntimeClass, through a real API server: the agent watches the
// RuntimeClasses; a pod naming one runs with the class's handler (its
// overhead set by the API server's admission); a pod whose RuntimeClass
// was deleted before the agent saw it is rejected: phase Failed, reason
// RuntimeClass, and a Warning event.
func TestRuntimeClass(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("runtimeclass")
	cleanupNode(t, c, nodeName)

	fast := &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("fast")},
		Handler:    "fast-handler",
		Overhead:   &nodev1.Overhead{PodFixed: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}},
	}
	createRuntimeClass(t, c, fast)
	gone := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("gone")}, Handler: "gone-handler"}
	createRuntimeClass(t, c, gone)

	known := newPod(uniqueName("known"), nodeName)
	known.Spec.RuntimeClassName = &fast.Name
	known = createPod(t, c, known)
	if o := known.Spec.Overhead.Memory(); o.Cmp(resource.MustParse("32Mi")) != 0 {
		t.Errorf("the API server set overhead %v, want the class's 32Mi", known.Spec.Overhead)
	}
	missing := newPod(uniqueName("missing"), nodeName)
	missing.Spec.RuntimeClassName = &gone.Name
	missing = createPod(t, c, missing)
	if err := c.NodeV1().RuntimeClasses().Delete(t.Context(), gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, kubeconfig(t)),
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

	eventually(t, 30*time.Second, "the pod of the known class Running with its handler", func() error {
		p, err := c.CoreV1().Pods(known.Namespace).Get(t.Context(), known.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		for _, s := range rt.Sandboxes() {
			if s.Name == known.Name && s.RuntimeHandler == fast.Handler {
				return nil
			}
		}
		return fmt.Errorf("no sandbox of %s with handler %q", known.Name, fast.Handler)
	})
	want := fmt.Sprintf("runtimeclass.node.k8s.io %q not found", gone.Name)
	eventually(t, 30*time.Second, "the pod of the deleted class Failed", func() error {
		p, err := c.CoreV1().Pods(missing.Namespace).Get(t.Context(), missing.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "RuntimeClass" || p.Status.Message != "Pod was rejected: "+want {
			return fmt.Errorf("status %s/%s %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		return nil
	})
	if typ, msg := podEvent(t, c, missing, "RuntimeClass"); typ != v1.EventTypeWarning || msg != want {
		t.Errorf("rejection event %s %q, want Warning %q", typ, msg, want)
	}
	for _, s := range rt.Sandboxes() {
		if s.Name == missing.Name {
			t.Errorf("the rejected pod reached the runtime")
		}
	}
}
