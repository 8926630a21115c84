package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// podLevelResizeFeature is the feature a Node declares
// (status.declaredFeatures) for the API server to take a resize of a
// pod's pod-level resources.
const podLevelResizeFeature = "InPlacePodLevelResourcesVerticalScaling"

// declares returns nil once the Node's status.declaredFeatures holds
// feature.
func declares(t *testing.T, c kubernetes.Interface, nodeName, feature string) error {
	n, err := c.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !slices.Contains(n.Status.DeclaredFeatures, feature) {
		return fmt.Errorf("declared features %v", n.Status.DeclaredFeatures)
	}
	return nil
}

// TestResizeSubresourcePodLevel runs the agent on the in-memory runtime,
// joined to the real API server, and resizes a pod's pod-level resources
// (spec.resources) through the resize subresource, the agent's Node
// declaring InPlacePodLevelResourcesVerticalScaling (without which the API
// server refuses such a resize): the pod's
// status.allocatedResources and status.resources follow and no resize
// condition stays; a pod-level increase that does not fit beside another
// pod gets PodResizePending/Deferred with the kubelet's message, the
// allocation unchanged, until the other pod is deleted: then it is
// allocated and done.
func TestResizeSubresourcePodLevel(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("podresize")
	startResizeAgent(t, c, nodeName)
	eventually(t, 30*time.Second, "the Node declaring "+podLevelResizeFeature, func() error {
		return declares(t, c, nodeName, podLevelResizeFeature)
	})

	initial := requirements("500m", "1", "64Mi", "128Mi")
	p := newPod(uniqueName("podresize"), nodeName)
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	p.Spec.Resources = initial.DeepCopy()
	pod := createPod(t, c, p)
	want := func(r v1.ResourceRequirements, wantConds ...string) func() error {
		return func() error {
			got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var conds []string
			for _, cond := range got.Status.Conditions {
				if cond.Type == v1.PodResizePending || cond.Type == v1.PodResizeInProgress {
					conds = append(conds, fmt.Sprintf("%s %s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message))
				}
			}
			if fmt.Sprint(conds) != fmt.Sprint(wantConds) {
				return fmt.Errorf("resize conditions %q, want %q", conds, wantConds)
			}
			if got.Status.Phase != v1.PodRunning {
				return fmt.Errorf("phase %q", got.Status.Phase)
			}
			if err := sameResources(r.Requests, got.Status.AllocatedResources); err != nil {
				return fmt.Errorf("allocatedResources: %w", err)
			}
			if got.Status.Resources == nil {
				return fmt.Errorf("no status.resources")
			}
			if err := sameResources(r.Limits, got.Status.Resources.Limits); err != nil {
				return fmt.Errorf("resources.limits: %w", err)
			}
			if err := sameResources(r.Requests, got.Status.Resources.Requests); err != nil {
				return fmt.Errorf("resources.requests: %w", err)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the pod running with its pod-level resources in the status", want(initial))

	resize := func(r v1.ResourceRequirements) {
		t.Helper()
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"resources": r}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("patching the resize subresource of %s: %v", pod.Name, err)
		}
	}
	bigger := requirements("1", "2", "128Mi", "256Mi")
	resize(bigger)
	eventually(t, 30*time.Second, "the pod-level resize shown in the status", want(bigger))

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
	resize(deferred)
	eventually(t, 30*time.Second, "PodResizePending Deferred", want(bigger,
		"PodResizePending True Deferred: Node didn't have enough resource: cpu, requested: 3000, used: 6000, capacity: 8000"))

	// The other pod deleted, its room is free: the deferred resize is
	// retried and allocated.
	zero := int64(0)
	if err := c.CoreV1().Pods(other.Namespace).Delete(t.Context(), other.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the deferred pod-level resize done", want(deferred))
}
