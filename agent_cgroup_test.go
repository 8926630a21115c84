package nodekit_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentPodCgroups, on the host's cgroup v1 hierarchy: a Guaranteed pod
// gets its cgroup under the node root with its limits before its sandbox
// starts; the cgroup is gone once
// the pod is; a pod with absurd resources is rejected at admission.
func TestAgentPodCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write the host's cgroups (CI runs as root)")
	}
	memRoot := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(memRoot, "memory.limit_in_bytes")); err != nil {
		t.Skip("no cgroup v1 memory hierarchy on this host")
	}
	root := fmt.Sprintf("nodekit-test-%08x", rand.Uint32())
	t.Cleanup(func() {
		if m, err := cgroup.Open("/sys/fs/cgroup"); err == nil {
			for _, name := range []string{root + "/burstable", root + "/besteffort", root} {
				_ = m.Destroy(t.Context(), name)
			}
		}
	})

	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	src := make(chanSource, 1)
	h := startAgent(t, rt, nodekit.Options{
		Cgroups: cgroup.PodManagerOptions{Root: root},
		Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
		Node:    node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
	})

	guaranteed := testPod("g", v1.RestartPolicyAlways, nil, "sleep 3600")
	limits := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: limits, Requests: limits}
	huge := testPod("huge", v1.RestartPolicyAlways, nil, "sleep 3600")
	huge.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Ti")}
	negative := testPod("negative", v1.RestartPolicyAlways, nil, "sleep 3600")
	negative.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("-1")}
	src <- []*v1.Pod{guaranteed, huge, negative}

	podDir := filepath.Join(memRoot, root, "pod"+string(guaranteed.UID))
	eventually(t, waitTimeout, "the guaranteed pod Running", func() bool { return h.running("default/g") })
	b, err := os.ReadFile(filepath.Join(podDir, "memory.limit_in_bytes"))
	if err != nil || strings.TrimSpace(string(b)) != "67108864" {
		t.Errorf("pod memory.limit_in_bytes = %q (%v), want 67108864", b, err)
	}
	b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", root, "pod"+string(guaranteed.UID), "cpu.cfs_quota_us"))
	if err != nil || strings.TrimSpace(string(b)) != "50000" {
		t.Errorf("pod cpu.cfs_quota_us = %q (%v), want 50000", b, err)
	}
	sandboxes := rt.Sandboxes()
	if len(sandboxes) != 1 {
		t.Fatalf("%d sandboxes, want 1 (the rejected pods never get one)", len(sandboxes))
	}
	for name, reason := range map[string]string{"default/huge": "OutOfmemory", "default/negative": "InvalidResources"} {
		s, _ := h.status(name)
		if s.Phase != v1.PodFailed || s.Reason != reason {
			t.Errorf("%s: status %s/%s (%s), want Failed/%s", name, s.Phase, s.Reason, s.Message, reason)
		}
	}

	src <- []*v1.Pod{}
	eventually(t, waitTimeout, "the pod cgroup removed", func() bool {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err)
	})
}
