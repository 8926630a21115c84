package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// resizeRequirements are a container's cpu and memory requests and limits.
func resizeRequirements(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	return v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
	}
}

// resizePatch asks, through the pod's resize subresource, for new
// resources of container name.
func (c *cluster) resizePatch(pod, name string, r v1.ResourceRequirements) {
	c.t.Helper()
	c.resizePatchField(pod, "containers", name, r)
}

// resizePatchField is resizePatch for a container of the list field
// ("containers" or "initContainers").
func (c *cluster) resizePatchField(pod, field, name string, r v1.ResourceRequirements) {
	c.t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{field: []map[string]any{{"name": name, "resources": r}}}})
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.api.CoreV1().Pods(c.ns).Patch(c.t.Context(), pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
		c.t.Fatalf("patching the resize subresource of pod %s: %v", pod, err)
	}
}

// resized returns nil once the API server's status of the pod shows
// container name resized to r in place: its resources and
// allocatedResources as asked, no resize condition.
func (c *cluster) resized(pod, name string, r v1.ResourceRequirements) (*v1.Pod, error) {
	p, err := c.getPod(c.t.Context(), pod)
	if err != nil {
		return nil, err
	}
	for _, cs := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		if cs.Name != name {
			continue
		}
		switch {
		case cs.State.Running == nil:
			return p, fmt.Errorf("container %s not running: %+v", name, cs.State)
		case cs.Resources == nil:
			return p, fmt.Errorf("container %s has no resources in its status", name)
		}
		for _, res := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			got, want := cs.Resources.Limits[res], r.Limits[res]
			if got.Cmp(want) != 0 {
				return p, fmt.Errorf("container %s: status limit %s %s, want %s", name, res, got.String(), want.String())
			}
			got, want = cs.AllocatedResources[res], r.Requests[res]
			if got.Cmp(want) != 0 {
				return p, fmt.Errorf("container %s: allocated %s %s, want %s", name, res, got.String(), want.String())
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodResizePending || cond.Type == v1.PodResizeInProgress {
				return p, fmt.Errorf("condition %s %s: %s (resources %v)", cond.Type, cond.Reason, cond.Message, cs.Resources)
			}
		}
		return p, nil
	}
	return p, fmt.Errorf("no status of container %s", name)
}

// containerCgroupFile reads a cgroup v1 file of a container of a
// Burstable pod of the test's cgroup root (containerID "" for the pod's
// own cgroup).
func (c *cluster) containerCgroupFile(controller string, uid types.UID, containerID, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(cgroupfs, controller, c.cgroupRoot, "burstable", "pod"+string(uid), containerID, file))
	return strings.TrimSpace(string(b)), err
}

// chanSource is a pod source that sends each pod given to send as its
// whole snapshot.
type chanSource struct{ pods chan []*v1.Pod }

func (s *chanSource) send(p *v1.Pod) { s.pods <- []*v1.Pod{p} }

func (s *chanSource) Run(ctx context.Context, out chan<- []*v1.Pod) error {
	select {
	case out <- nil: // the source is ready
	case <-ctx.Done():
		return nil
	}
	for {
		select {
		case p := <-s.pods:
			select {
			case out <- p:
			case <-ctx.Done():
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// TestInPlaceResize runs pods from the API server on containerd 2.x and
// resizes them through the resize subresource, as kubectl patch
// --subresource resize does: a Burstable pod grows and shrinks in CPU and
// memory without a restart (same container ID, restart count 0, the
// container's and the pod's cgroup files show the new limits, the status
// its resources and allocated resources); a memory resize of a container
// whose resizePolicy says RestartContainer restarts it; a resize beyond
// the node's capacity is refused by the API server itself, and a pod of
// another source (static) asking for a resize is PodResizePending/
// Infeasible and keeps its container and allocation. A restartable init
// container (sidecar) is resized in place as an app container is, and
// the kubelet's ResizeStarted and ResizeCompleted events are recorded.
func TestInPlaceResize(t *testing.T) {
	c := newClusterOn(t, newFixture(t, envEndpoint2), false)
	src := &chanSource{pods: make(chan []*v1.Pod, 1)}
	a := c.agentWith(nil, "in-place resize", func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
		o.Sources = append(o.Sources, nodekit.NamedSource{Name: "test", Source: src})
	})
	initial := resizeRequirements("100m", "200m", "32Mi", "64Mi")
	c.createPod(c.apiPod("grow", v1.Container{Name: "app", Command: []string{"sleep", "3600"}, Resources: initial}))
	restarting := c.apiPod("restart", v1.Container{
		Name: "app", Command: []string{"sleep", "3600"}, Resources: initial,
		ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
	})
	c.createPod(restarting)
	always := v1.ContainerRestartPolicyAlways
	withSidecar := c.apiPod("sidecar", v1.Container{Name: "app", Command: []string{"sleep", "3600"}, Resources: initial})
	withSidecar.Spec.InitContainers = []v1.Container{{Name: "side", Image: busyboxImage, ImagePullPolicy: v1.PullIfNotPresent,
		Command: []string{"sleep", "3600"}, Resources: initial, RestartPolicy: &always}}
	c.createPod(withSidecar)

	var pod *v1.Pod
	eventuallyNil(t, 90*time.Second, "the pods Running and Ready with their resources in the status", func() error {
		if _, err := c.resized("sidecar", "side", initial); err != nil {
			return fmt.Errorf("pod sidecar: %w", err)
		}
		for _, name := range []string{"grow", "restart", "sidecar"} {
			var err error
			if pod, err = c.resized(name, "app", initial); err != nil {
				return fmt.Errorf("pod %s: %w", name, err)
			}
			if err := checkRunning(pod.Status, true); err != nil {
				return fmt.Errorf("pod %s: %w", name, err)
			}
		}
		return nil
	})
	pod, _ = c.getPod(t.Context(), "grow")
	uid := pod.UID
	id := containerIDs(pod.Status)["app"]
	_, cgroupErr := c.containerCgroupFile("memory", uid, id, "memory.limit_in_bytes")
	if cgroupErr != nil {
		t.Logf("the container's cgroup v1 files are not readable (%v): the cgroup checks are skipped", cgroupErr)
	}
	checkCgroups := func(memBytes, quota int64) {
		t.Helper()
		if cgroupErr != nil {
			return
		}
		for _, f := range []struct {
			controller, containerID, file string
			want                          int64
		}{
			{"memory", id, "memory.limit_in_bytes", memBytes},
			{"cpu", id, "cpu.cfs_quota_us", quota},
			{"memory", "", "memory.limit_in_bytes", memBytes},
			{"cpu", "", "cpu.cfs_quota_us", quota},
		} {
			got, err := c.containerCgroupFile(f.controller, uid, f.containerID, f.file)
			if err != nil || got != fmt.Sprint(f.want) {
				t.Errorf("cgroup %s of container %q: %s, %v; want %d", f.file, f.containerID, got, err, f.want)
			}
		}
	}
	checkCgroups(64<<20, 20000)
	// A pod without pod-level resources reports its aggregated resources
	// as status.allocatedResources and status.resources, as the kubelet;
	// the Node reports the runtime's handlers (userns_test.go).
	eventuallyNil(t, 30*time.Second, "the grow pod's status.allocatedResources and status.resources", func() error {
		_, err := c.podLevelResized("grow", initial)
		return err
	})
	eventuallyNil(t, 30*time.Second, "the Node's status.runtimeHandlers", func() error { return c.runtimeHandlersReported(t) })

	steps := []struct {
		name string
		r    v1.ResourceRequirements
		mem  int64
		quot int64
	}{
		{"up", resizeRequirements("300m", "400m", "64Mi", "128Mi"), 128 << 20, 40000},
		{"down", resizeRequirements("50m", "150m", "16Mi", "48Mi"), 48 << 20, 15000},
	}
	for _, s := range steps {
		c.resizePatch("grow", "app", s.r)
		took := eventuallyNil(t, 60*time.Second, "resize "+s.name+" shown in the pod's status", func() error {
			var err error
			pod, err = c.resized("grow", "app", s.r)
			return err
		})
		t.Logf("resize %s shown in the API server after %v", s.name, took.Round(time.Millisecond))
		if got := containerIDs(pod.Status)["app"]; got != id {
			t.Errorf("resize %s replaced the container: %s, was %s", s.name, got, id)
		}
		if rc := pod.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("resize %s: restart count %d", s.name, rc)
		}
		checkCgroups(s.mem, s.quot)
	}

	// The sidecar grows in place: same container, no restart, its
	// cgroup raised, the events of the kubelet.
	sc, _ := c.getPod(t.Context(), "sidecar")
	sideID := ""
	for _, cs := range sc.Status.InitContainerStatuses {
		_, sideID, _ = strings.Cut(cs.ContainerID, "://")
	}
	bigSide := resizeRequirements("150m", "300m", "48Mi", "96Mi")
	c.resizePatchField("sidecar", "initContainers", "side", bigSide)
	eventuallyNil(t, 60*time.Second, "the sidecar resized in place", func() error {
		p, err := c.resized("sidecar", "side", bigSide)
		if err != nil {
			return err
		}
		cs := p.Status.InitContainerStatuses[0]
		if _, id, _ := strings.Cut(cs.ContainerID, "://"); cs.RestartCount != 0 || id != sideID {
			return fmt.Errorf("sidecar restarts %d, container %s (was %s)", cs.RestartCount, cs.ContainerID, sideID)
		}
		return nil
	})
	if cgroupErr == nil {
		if got, err := c.containerCgroupFile("memory", sc.UID, sideID, "memory.limit_in_bytes"); err != nil || got != fmt.Sprint(96<<20) {
			t.Errorf("sidecar memory.limit_in_bytes %s, %v; want %d", got, err, 96<<20)
		}
	}
	eventuallyNil(t, 30*time.Second, "the sidecar's ResizeStarted and ResizeCompleted events", func() error {
		evs, err := c.api.CoreV1().Events(c.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=sidecar"})
		if err != nil {
			return err
		}
		seen := map[string]string{}
		for _, e := range evs.Items {
			seen[e.Reason] = e.Message
		}
		for _, reason := range []string{"ResizeStarted", "ResizeCompleted"} {
			if !strings.Contains(seen[reason], `"initContainers":[{"name":"side"`) {
				return fmt.Errorf("event %s: %q", reason, seen[reason])
			}
		}
		return nil
	})

	before, _ := c.getPod(t.Context(), "restart")
	oldID := containerIDs(before.Status)["app"]
	bigger := resizeRequirements("100m", "200m", "32Mi", "96Mi")
	c.resizePatch("restart", "app", bigger)
	eventuallyNil(t, 60*time.Second, "the RestartContainer resize done", func() error {
		p, err := c.resized("restart", "app", bigger)
		if err != nil {
			return err
		}
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 1 || containerIDs(p.Status)["app"] == oldID {
			return fmt.Errorf("restart count %d, container %s (was %s)", cs.RestartCount, containerIDs(p.Status)["app"], oldID)
		}
		return nil
	})

	// The API server itself refuses a resize beyond the node's
	// allocatable resources; a pod of the agent's other sources asks it
	// of the agent, which refuses it as the kubelet refuses static pods.
	static := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "static-resize", Namespace: c.ns, UID: types.UID(unique("static-uid"))},
		Spec: v1.PodSpec{
			NodeName:      c.node,
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "app", Image: busyboxImage, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sleep", "3600"}, Resources: initial}},
		},
	}
	src.send(static)
	key := c.ns + "/static-resize"
	var staticID string
	eventuallyNil(t, 60*time.Second, "the static pod running", func() error {
		s, ok := a.status(key)
		if !ok || len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("status %+v", s.ContainerStatuses)
		}
		staticID = s.ContainerStatuses[0].ContainerID
		return nil
	})
	resized := static.DeepCopy()
	resized.Spec.Containers[0].Resources = resizeRequirements("200m", "400m", "32Mi", "64Mi")
	src.send(resized)
	eventuallyNil(t, 60*time.Second, "PodResizePending Infeasible for the static pod", func() error {
		s, _ := a.status(key)
		for _, cond := range s.Conditions {
			if cond.Type == v1.PodResizePending {
				if cond.Reason != v1.PodReasonInfeasible || cond.Message != "In-place resize of static-pods is not supported" {
					return fmt.Errorf("PodResizePending %s: %q", cond.Reason, cond.Message)
				}
				if cs := s.ContainerStatuses[0]; cs.ContainerID != staticID || cs.RestartCount != 0 {
					return fmt.Errorf("container %s restarts %d, was %s", cs.ContainerID, cs.RestartCount, staticID)
				}
				if got := s.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU]; got.Cmp(resource.MustParse("100m")) != 0 {
					return fmt.Errorf("allocated cpu %s after an infeasible resize", got.String())
				}
				return nil
			}
		}
		return fmt.Errorf("no PodResizePending condition: %+v", s.Conditions)
	})
	checkCgroups(48<<20, 15000)
}
