package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// podLevelFeature is the feature a Node declares (status.declaredFeatures)
// for the API server to take a resize of a pod's pod-level resources.
const podLevelFeature = "InPlacePodLevelResourcesVerticalScaling"

// declaresPodLevelResize returns nil once the Node's
// status.declaredFeatures holds podLevelFeature.
func (c *cluster) declaresPodLevelResize() error {
	n, err := c.api.CoreV1().Nodes().Get(c.t.Context(), c.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !slices.Contains(n.Status.DeclaredFeatures, podLevelFeature) {
		return fmt.Errorf("declared features %v", n.Status.DeclaredFeatures)
	}
	return nil
}

// podLevelResized returns nil once the API server's status of the pod
// shows its pod-level resources resized to r in place: status.resources
// limits and requests and status.allocatedResources as asked, no resize
// condition, its container running.
func (c *cluster) podLevelResized(name string, r v1.ResourceRequirements) (*v1.Pod, error) {
	p, err := c.getPod(c.t.Context(), name)
	if err != nil {
		return nil, err
	}
	if err := checkRunning(p.Status, true); err != nil {
		return p, err
	}
	if p.Status.Resources == nil {
		return p, fmt.Errorf("no status.resources")
	}
	for _, res := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		for _, l := range []struct {
			what      string
			got, want v1.ResourceList
		}{
			{"limit", p.Status.Resources.Limits, r.Limits},
			{"request", p.Status.Resources.Requests, r.Requests},
			{"allocated", p.Status.AllocatedResources, r.Requests},
		} {
			got, want := l.got[res], l.want[res]
			if got.Cmp(want) != 0 {
				return p, fmt.Errorf("status %s %s %s, want %s", l.what, res, got.String(), want.String())
			}
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodResizePending || cond.Type == v1.PodResizeInProgress {
			return p, fmt.Errorf("condition %s %s: %s", cond.Type, cond.Reason, cond.Message)
		}
	}
	return p, nil
}

// TestInPlaceResizePodLevel runs a pod with pod-level resources
// (spec.resources, its container setting none) from the API server on
// containerd 2.x and resizes them through the resize subresource
// (InPlacePodLevelResourcesVerticalScaling): the pod cgroup's memory limit,
// CFS quota and CPU shares follow up and down, the container keeps its ID
// and restart count 0, and the pod's status.resources and
// status.allocatedResources show the new values with no resize condition
// left.
func TestInPlaceResizePodLevel(t *testing.T) {
	c := newClusterOn(t, newFixture(t, envEndpoint2), false)
	c.agentWith(nil, "pod-level in-place resize", func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
	})
	initial := resizeRequirements("100m", "200m", "32Mi", "64Mi")
	pod := c.apiPod("pod-level", v1.Container{Name: "app", Command: []string{"sleep", "3600"}})
	pod.Spec.Resources = initial.DeepCopy()
	c.createPod(pod)

	var got *v1.Pod
	eventuallyNil(t, 90*time.Second, "the pod Running with its pod-level resources in the status", func() error {
		var err error
		got, err = c.podLevelResized("pod-level", initial)
		return err
	})
	uid := got.UID
	id := containerIDs(got.Status)["app"]
	_, cgroupErr := c.containerCgroupFile("memory", uid, "", "memory.limit_in_bytes")
	if cgroupErr != nil {
		t.Logf("the pod's cgroup v1 files are not readable (%v): the cgroup checks are skipped", cgroupErr)
	}
	checkPodCgroup := func(step string, mem, quota, shares int64) {
		t.Helper()
		if cgroupErr != nil {
			return
		}
		for _, f := range []struct {
			controller, file string
			want             int64
		}{
			{"memory", "memory.limit_in_bytes", mem},
			{"cpu", "cpu.cfs_quota_us", quota},
			{"cpu", "cpu.shares", shares},
		} {
			if got, err := c.containerCgroupFile(f.controller, uid, "", f.file); err != nil || got != fmt.Sprint(f.want) {
				t.Errorf("%s: pod cgroup %s %s, %v; want %d", step, f.file, got, err, f.want)
			}
		}
	}
	checkPodCgroup("initial", 64<<20, 20000, 102)

	eventuallyNil(t, 30*time.Second, "the Node declaring "+podLevelFeature, c.declaresPodLevelResize)
	for _, s := range []struct {
		name               string
		r                  v1.ResourceRequirements
		mem, quota, shares int64
	}{
		{"up", resizeRequirements("300m", "400m", "64Mi", "128Mi"), 128 << 20, 40000, 307},
		{"down", resizeRequirements("50m", "150m", "16Mi", "48Mi"), 48 << 20, 15000, 51},
	} {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"resources": s.r}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.api.CoreV1().Pods(c.ns).Patch(t.Context(), "pod-level", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("patching the resize subresource of pod-level: %v", err)
		}
		took := eventuallyNil(t, 60*time.Second, "pod-level resize "+s.name+" shown in the pod's status", func() error {
			var err error
			got, err = c.podLevelResized("pod-level", s.r)
			return err
		})
		t.Logf("pod-level resize %s shown in the API server after %v", s.name, took.Round(time.Millisecond))
		if cid := containerIDs(got.Status)["app"]; cid != id {
			t.Errorf("resize %s replaced the container: %s, was %s", s.name, cid, id)
		}
		if rc := got.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("resize %s: restart count %d", s.name, rc)
		}
		checkPodCgroup(s.name, s.mem, s.quota, s.shares)
	}
}
