package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// nodeCondition is the status of the Node's condition typ.
func (c *cluster) nodeCondition(typ v1.NodeConditionType) (v1.ConditionStatus, error) {
	n, err := c.api.CoreV1().Nodes().Get(c.t.Context(), c.node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == typ {
			return cond.Status, nil
		}
	}
	return "", fmt.Errorf("node %s has no %s condition", c.node, typ)
}

// TestDiskPressureEviction: the agent's root directory is a 64Mi tmpfs; a
// BestEffort API pod fills its emptyDir on it. The node reports
// DiskPressure, the pod is evicted (phase Failed, reason Evicted, the
// kubelet's message), its emptyDir goes with it, and once the space is
// back the condition clears after the pressure transition period.
func TestDiskPressureEviction(t *testing.T) {
	c := newCluster(t, false)
	if err := syscall.Mount("tmpfs", c.rootDir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mounting a tmpfs on the agent's root directory: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(c.rootDir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", c.rootDir, err)
		}
	})
	a := c.agentWith(nil, "disk pressure", func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
		// The images of the shared containerd are not this test's to
		// reclaim.
		o.NodeResources.GC.DisableImages = true
		o.NodeResources.Eviction.Disable = false // the agents of the other tests run without it
		o.NodeResources.Eviction.Manager.MonitoringInterval = time.Second
		o.NodeResources.Eviction.Manager.PressureTransitionPeriod = 10 * time.Second
	})
	start := time.Now()
	eventuallyNil(t, 30*time.Second, "the node Ready", func() error { return c.nodeReady(t.Context(), start) })
	if s, err := c.nodeCondition(v1.NodeDiskPressure); err != nil || s != v1.ConditionFalse {
		t.Fatalf("DiskPressure = %q, %v before the pod; want False", s, err)
	}

	p := c.apiPod("filler", v1.Container{
		Name:         "fill",
		Command:      []string{"sh", "-c", `trap "exit 0" TERM; dd if=/dev/zero of=/data/fill bs=1M count=60; while true; do sleep 1 & wait; done`},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c.createPod(p)
	filled := time.Now()

	eventuallyNil(t, 60*time.Second, "DiskPressure True", func() error {
		s, err := c.nodeCondition(v1.NodeDiskPressure)
		if err == nil && s != v1.ConditionTrue {
			err = fmt.Errorf("DiskPressure %s", s)
		}
		return err
	})
	t.Logf("pod created → DiskPressure after %s", time.Since(filled).Round(time.Millisecond))
	var evicted *v1.Pod
	eventuallyNil(t, 60*time.Second, "the pod evicted", func() error {
		got, err := c.getPod(t.Context(), "filler")
		if err != nil {
			return err
		}
		if got.Status.Phase != v1.PodFailed || got.Status.Reason != "Evicted" {
			return fmt.Errorf("phase %s, reason %q", got.Status.Phase, got.Status.Reason)
		}
		evicted = got
		return nil
	})
	t.Logf("pod created → evicted after %s: %q", time.Since(filled).Round(time.Millisecond), evicted.Status.Message)
	if msg := evicted.Status.Message; !strings.HasPrefix(msg, "The node was low on resource: ephemeral-storage. Threshold quantity: ") {
		t.Errorf("message %q, want the kubelet's", msg)
	}
	found := false
	for _, cond := range evicted.Status.Conditions {
		if cond.Type == v1.DisruptionTarget && cond.Status == v1.ConditionTrue && cond.Reason == "TerminationByKubelet" {
			found = true
		}
	}
	if !found {
		t.Errorf("conditions %+v lack DisruptionTarget (TerminationByKubelet)", evicted.Status.Conditions)
	}
	took := eventuallyNil(t, 90*time.Second, "DiskPressure False again", func() error {
		s, err := c.nodeCondition(v1.NodeDiskPressure)
		if err == nil && s != v1.ConditionFalse {
			err = fmt.Errorf("DiskPressure %s", s)
		}
		return err
	})
	t.Logf("evicted → DiskPressure False after %s (transition period 10s)", took.Round(time.Millisecond))
	if n := a.logs.count("Eviction manager: evicting pod", "filler"); n != 1 {
		t.Errorf("%d eviction log lines for the pod, want 1", n)
	}
}

// TestMemoryPressureEviction: the agent is given 1Gi of memory
// (Options.Node.Capacity, MemoryOfPodsOnly: memory.available is that less the
// working set of its pod cgroups, measured in the real cgroups, so the
// shared host's other workloads do not count) and a hard threshold of
// memory.available<924Mi: pressure once its pods use more than 100Mi. A
// Guaranteed pod (32Mi) runs; a BestEffort pod then holds 128Mi in a
// shell variable. The node reports MemoryPressure, the BestEffort pod is
// evicted with the kubelet's message naming its container, the Guaranteed
// one keeps running, and the condition clears after the transition
// period.
func TestMemoryPressureEviction(t *testing.T) {
	c := newCluster(t, false)
	threshold := resource.MustParse("924Mi")
	a := c.agentWith(nil, "memory pressure", func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
		o.Node.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi")}
		o.NodeResources.GC.DisableImages = true
		o.NodeResources.Eviction.Disable = false // the agents of the other tests run without it
		o.NodeResources.Eviction.MemoryOfPodsOnly = true
		o.NodeResources.Eviction.Manager.Thresholds = []eviction.Threshold{{Signal: eviction.SignalMemoryAvailable, Value: eviction.Value{Quantity: &threshold}}}
		o.NodeResources.Eviction.Manager.MonitoringInterval = time.Second
		o.NodeResources.Eviction.Manager.PressureTransitionPeriod = 10 * time.Second
	})
	start := time.Now()
	eventuallyNil(t, 30*time.Second, "the node Ready", func() error { return c.nodeReady(t.Context(), start) })
	if s, err := c.nodeCondition(v1.NodeMemoryPressure); err != nil || s != v1.ConditionFalse {
		t.Fatalf("MemoryPressure = %q, %v before the pods; want False", s, err)
	}

	sleep := []string{"sh", "-c", `trap "exit 0" TERM; while true; do sleep 1 & wait; done`}
	limits := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	guaranteed := c.apiPod("guaranteed", v1.Container{Name: "sleep", Command: sleep,
		Resources: v1.ResourceRequirements{Requests: limits, Limits: limits}})
	c.createPod(guaranteed)
	eventuallyNil(t, 60*time.Second, "the Guaranteed pod Running", func() error {
		got, err := c.getPod(t.Context(), "guaranteed")
		if err == nil && got.Status.Phase != v1.PodRunning {
			err = fmt.Errorf("phase %s", got.Status.Phase)
		}
		return err
	})
	if s, err := c.nodeCondition(v1.NodeMemoryPressure); err != nil || s != v1.ConditionFalse {
		t.Fatalf("MemoryPressure = %q, %v with the Guaranteed pod alone; want False", s, err)
	}

	hog := c.apiPod("hog", v1.Container{Name: "hog", Command: []string{"sh", "-c",
		`x=$(head -c 134217728 /dev/zero | tr "\0" a); echo held; trap "exit 0" TERM; while true; do sleep 1 & wait; done`}})
	c.createPod(hog)
	created := time.Now()
	eventuallyNil(t, 90*time.Second, "MemoryPressure True", func() error {
		s, err := c.nodeCondition(v1.NodeMemoryPressure)
		if err == nil && s != v1.ConditionTrue {
			err = fmt.Errorf("MemoryPressure %s", s)
		}
		return err
	})
	t.Logf("hog created → MemoryPressure after %s", time.Since(created).Round(time.Millisecond))
	var evicted *v1.Pod
	eventuallyNil(t, 60*time.Second, "the BestEffort pod evicted", func() error {
		got, err := c.getPod(t.Context(), "hog")
		if err != nil {
			return err
		}
		if got.Status.Phase != v1.PodFailed || got.Status.Reason != "Evicted" {
			return fmt.Errorf("phase %s, reason %q", got.Status.Phase, got.Status.Reason)
		}
		evicted = got
		return nil
	})
	t.Logf("hog created → evicted after %s: %q", time.Since(created).Round(time.Millisecond), evicted.Status.Message)
	msg := evicted.Status.Message
	if !strings.HasPrefix(msg, "The node was low on resource: memory. Threshold quantity: 924Mi, available: ") ||
		!strings.Contains(msg, "Container hog was using ") || !strings.HasSuffix(msg, "request is 0, has larger consumption of memory. ") {
		t.Errorf("message %q, want the kubelet's naming container hog", msg)
	}
	took := eventuallyNil(t, 90*time.Second, "MemoryPressure False again", func() error {
		s, err := c.nodeCondition(v1.NodeMemoryPressure)
		if err == nil && s != v1.ConditionFalse {
			err = fmt.Errorf("MemoryPressure %s", s)
		}
		return err
	})
	t.Logf("evicted → MemoryPressure False after %s (transition period 10s)", took.Round(time.Millisecond))
	got, err := c.getPod(t.Context(), "guaranteed")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PodRunning || got.Status.Reason == "Evicted" {
		t.Errorf("the Guaranteed pod is %s (%s): it must outlive the BestEffort one", got.Status.Phase, got.Status.Reason)
	}
	if n := a.logs.count("Eviction manager: evicting pod", "guaranteed"); n != 0 {
		t.Errorf("%d eviction log lines for the Guaranteed pod, want 0", n)
	}
}

// TestLocalStorageLimitEviction: a pod writes 8Mi to an emptyDir with a
// sizeLimit of 4Mi, a container of another 8Mi of logs with an
// ephemeral-storage limit of 4Mi: both pods are evicted with the kubelet's messages, without any node
// pressure, while a pod within its limits keeps running.
func TestLocalStorageLimitEviction(t *testing.T) {
	c := newCluster(t, false)
	c.agentWith(nil, "local storage limits", func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
		o.NodeResources.GC.DisableImages = true
		o.NodeResources.Eviction.Disable = false // the agents of the other tests run without it
		// No threshold: local storage limits alone.
		o.NodeResources.Eviction.Manager.Thresholds = []eviction.Threshold{}
		o.NodeResources.Eviction.Manager.MonitoringInterval = time.Second
	})
	start := time.Now()
	eventuallyNil(t, 30*time.Second, "the node Ready", func() error { return c.nodeReady(t.Context(), start) })

	hold := `trap "exit 0" TERM; while true; do sleep 1 & wait; done`
	sizeLimit := resource.MustParse("4Mi")
	data := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &sizeLimit}}}
	c.createPod(c.apiPod("emptydir", v1.Container{
		Name:         "fill",
		Command:      []string{"sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=8; " + hold},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}, data))
	storage := v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("4Mi")}
	// Two containers: the pod's limit (the sum, 104Mi) holds, the chatty
	// container's own does not.
	logs := c.apiPod("logs", v1.Container{
		Name:      "chatty",
		Command:   []string{"sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x; echo; " + hold},
		Resources: v1.ResourceRequirements{Limits: storage},
	})
	logs.Spec.Containers = append(logs.Spec.Containers, v1.Container{
		Name: "roomy", Image: busyboxImage, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", hold},
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}},
	})
	c.createPod(logs)
	c.createPod(c.apiPod("quiet", v1.Container{
		Name:         "quiet",
		Command:      []string{"sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=1; " + hold},
		Resources:    v1.ResourceRequirements{Limits: storage},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}, data))

	for name, want := range map[string]string{
		"emptydir": `Usage of EmptyDir volume "data" exceeds the limit "4Mi".`,
		"logs":     `Container chatty exceeded its local ephemeral storage limit "4Mi". `,
	} {
		eventuallyNil(t, 90*time.Second, name+" evicted", func() error {
			got, err := c.getPod(t.Context(), name)
			if err != nil {
				return err
			}
			if got.Status.Phase != v1.PodFailed || got.Status.Reason != "Evicted" {
				return fmt.Errorf("phase %s, reason %q", got.Status.Phase, got.Status.Reason)
			}
			if got.Status.Message != want {
				t.Errorf("%s: message %q, want %q", name, got.Status.Message, want)
			}
			return nil
		})
	}
	got, err := c.getPod(t.Context(), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its limits is %s (%s %q)", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	for _, cond := range []v1.NodeConditionType{v1.NodeDiskPressure, v1.NodeMemoryPressure} {
		if s, err := c.nodeCondition(cond); err != nil || s != v1.ConditionFalse {
			t.Errorf("%s = %q, %v; want False", cond, s, err)
		}
	}
}
