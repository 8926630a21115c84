package nodekit_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// TestAgentEviction: under memory pressure (from the stats the test
// gives, lasting while the hog runs) the agent evicts the BestEffort pod
// using the most memory, which ends Failed with reason Evicted and the
// kubelet's message, and no other; a new BestEffort pod is rejected while
// the MemoryPressure condition lasts and a Guaranteed one is admitted; allocatable leaves out the hard memory threshold and the
// reservations.
func TestAgentEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		var mu sync.Mutex
		pressure := false
		stats := eviction.StatsFunc(func(ctx context.Context) (*eviction.Stats, error) {
			mu.Lock()
			defer mu.Unlock()
			u := func(n uint64) *uint64 { return &n }
			// The hog's memory is what is short: once it no longer runs,
			// the pressure is gone.
			avail := uint64(1 << 30)
			if pressure {
				cs, err := rt.ListContainers(ctx, nil)
				if err != nil {
					return nil, err
				}
				for _, c := range cs {
					if c.Labels["io.kubernetes.pod.name"] == "hog" && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
						avail = 50 << 20
					}
				}
			}
			return &eviction.Stats{
				Memory: &eviction.MemoryStats{Available: avail, Capacity: 4 << 30},
				Pods: map[types.UID]eviction.PodStats{
					"uid-hog":   {MemoryWorkingSet: u(900 << 20)},
					"uid-quiet": {MemoryWorkingSet: u(10 << 20)},
				},
			}, nil
		})
		h := startAgent(t, rt, nodekit.Options{
			// Pods from a source named "api" are not static pods: they may
			// be evicted.
			Sources: []nodekit.NamedSource{{Name: sources.APIServerSource, Source: src}},
			NodeResources: nodekit.NodeResourcesOptions{
				SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("512Mi")},
				KubeReserved:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
				Eviction: nodekit.EvictionOptions{
					Enable:  true, // the test's cgroups are off
					Manager: eviction.Options{Stats: stats},
				},
			},
			Node: node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("4Gi")}},
		})
		hog := testPod("hog", v1.RestartPolicyAlways, nil, "sleep 3600")
		quiet := testPod("quiet", v1.RestartPolicyAlways, nil, "sleep 3600")
		src <- []*v1.Pod{hog, quiet}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !h.running("default/hog") || !h.running("default/quiet") {
			t.Fatal("pods not running before the pressure")
		}
		alloc := h.agent.Allocatable()
		wantMem := resource.MustParse("4Gi")
		wantMem.Sub(resource.MustParse("612Mi")) // system-reserved and memory.available<100Mi
		if m, c := alloc[v1.ResourceMemory], alloc[v1.ResourceCPU]; m.Cmp(wantMem) != 0 || c.String() != "3500m" {
			t.Errorf("allocatable memory %s cpu %s, want %s and 3500m", m.String(), c.String(), wantMem.String())
		}

		mu.Lock()
		pressure = true
		mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		s, _ := h.status("default/hog")
		if s.Phase != v1.PodFailed || s.Reason != "Evicted" ||
			!strings.HasPrefix(s.Message, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ") {
			t.Errorf("hog status %s/%s %q, want Failed/Evicted with the kubelet's message", s.Phase, s.Reason, s.Message)
		}
		if !h.running("default/quiet") {
			t.Error("the quiet pod was evicted too (one pod per synchronization)")
		}
		if got := h.agent.NodeConditions(); len(got) != 1 || got[0] != v1.NodeMemoryPressure {
			t.Errorf("conditions %v, want [MemoryPressure]", got)
		}

		// Under memory pressure: BestEffort rejected, Guaranteed admitted.
		be := testPod("late-be", v1.RestartPolicyAlways, nil, "sleep 3600")
		g := testPod("late-g", v1.RestartPolicyAlways, nil, "sleep 3600")
		g.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}
		src <- []*v1.Pod{hog, quiet, be, g}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if s, _ := h.status("default/late-be"); s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
			t.Errorf("BestEffort pod under memory pressure: %s/%s %q, want rejected", s.Phase, s.Reason, s.Message)
		}
		if !h.running("default/late-g") {
			t.Error("Guaranteed pod not admitted under memory pressure")
		}
	})
}
