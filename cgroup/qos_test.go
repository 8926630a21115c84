package cgroup_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

// countingManager counts the updates of QoS cgroups and keeps the last
// configuration written to each.
type countingManager struct {
	cgroup.Manager
	updates int
	last    map[string]cgroup.ResourceConfig
}

func (c *countingManager) Update(name string, rc *cgroup.ResourceConfig) error {
	c.updates++
	if c.last == nil {
		c.last = map[string]cgroup.ResourceConfig{}
	}
	c.last[name] = *rc
	return c.Manager.Update(name, rc)
}

// qosFiles reads what UpdateQoS writes on cgroup v2.
func qosFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, f := range []string{"kubepods/memory.min", "kubepods/burstable/memory.min", "kubepods/burstable/memory.max", "kubepods/besteffort/memory.max", "kubepods/burstable/cpu.weight"} {
		got[f] = cgrouptest.Read(t, root, f)
	}
	return got
}

// TestUpdateQoSIncremental changes the active pods as the agent does
// (pods appended one at a time, a pod replaced by an update, pods
// removed, a batch of BestEffort pods) and checks after each change that
// the QoS cgroups hold what a PodManager given the same pods afresh
// writes.
func TestUpdateQoSIncremental(t *testing.T) {
	opts := cgroup.PodManagerOptions{MemoryReservePercent: 50, MemoryQoS: true, Allocatable: rl("memory", "64Gi")}
	root := cgrouptest.V2(t)
	o := opts
	o.CgroupfsRoot = root
	pm := newPM(t, o)

	check := func(step string, active []*v1.Pod) {
		t.Helper()
		if err := pm.UpdateQoS(active); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		freshRoot := cgrouptest.V2(t)
		fo := opts
		fo.CgroupfsRoot = freshRoot
		if err := newPM(t, fo).UpdateQoS(active); err != nil {
			t.Fatalf("%s, afresh: %v", step, err)
		}
		if diff := cmp.Diff(qosFiles(t, freshRoot), qosFiles(t, root)); diff != "" {
			t.Fatalf("%s: QoS files (-afresh +incremental):\n%s", step, diff)
		}
	}

	var active []*v1.Pod
	for i := range 20 {
		var p *v1.Pod
		switch i % 3 {
		case 0:
			p = podOf(fmt.Sprint("b", i), ctr("a", rl("cpu", fmt.Sprintf("%dm", 10*(i+1)), "memory", fmt.Sprintf("%dMi", i+1)), nil))
		case 1:
			p = podOf(fmt.Sprint("g", i), ctr("a", rl("cpu", "1", "memory", fmt.Sprintf("%dMi", 2*i+1)), rl("cpu", "1", "memory", fmt.Sprintf("%dMi", 2*i+1))))
		default:
			p = podOf(fmt.Sprint("be", i), ctr("a", nil, nil))
		}
		active = append(active, p)
		check(fmt.Sprintf("pod %d appended", i), active)
	}
	// An update replaces a pod in the middle with a new object.
	active = append([]*v1.Pod(nil), active...)
	active[3] = podOf("b3", ctr("a", rl("cpu", "900m", "memory", "900Mi"), nil))
	check("a pod replaced", active)
	// Pods removed.
	active = append(active[:5:5], active[9:]...)
	check("pods removed", active)
	// The same pods again, and fewer pods than the last call.
	check("the same pods", active)
	check("the first pods only", active[:4])
	check("all pods again", active)
}

// TestUpdateQoSUnchanged checks that active pods that leave the QoS
// cgroups' values as they are write nothing, and that values written
// after a failure are written again.
func TestUpdateQoSUnchanged(t *testing.T) {
	inner, err := cgroup.Open(cgrouptest.V1(t))
	if err != nil {
		t.Fatal(err)
	}
	cm := &countingManager{Manager: inner}
	pm := newPM(t, cgroup.PodManagerOptions{Manager: cm})
	active := []*v1.Pod{bPod}
	if err := pm.UpdateQoS(active); err != nil {
		t.Fatal(err)
	}
	first := cm.updates
	if first == 0 {
		t.Fatal("the first UpdateQoS wrote nothing")
	}
	for i := range 5 {
		active = append(active, podOf(fmt.Sprint("be", i), ctr("a", nil, nil)))
		if err := pm.UpdateQoS(active); err != nil {
			t.Fatal(err)
		}
	}
	if cm.updates != first {
		t.Errorf("adding BestEffort pods made %d updates, want none", cm.updates-first)
	}
	active = append(active, podOf("b2", ctr("a", rl("cpu", "100m"), nil)))
	if err := pm.UpdateQoS(active); err != nil {
		t.Fatal(err)
	}
	if cm.updates == first {
		t.Fatal("a Burstable pod's cpu request changed nothing")
	}
	// MilliCPUToShares(250+100) = 358.
	if got := cm.last["/kubepods/burstable"].CPUShares; got == nil || *got != 358 {
		t.Errorf("burstable cpu shares %v, want 358", got)
	}
}

// nopUpdates is a Manager whose updates write nothing: what UpdateQoS
// costs besides the cgroup files.
type nopUpdates struct{ cgroup.Manager }

func (nopUpdates) Update(string, *cgroup.ResourceConfig) error { return nil }

// BenchmarkUpdateQoS admits pods one at a time, as pods that reach the
// agent one by one are, each admission calling UpdateQoS with the active
// pods (a third Burstable, a third Guaranteed, a third BestEffort), on a
// Manager whose updates write nothing (the files' cost is per call, not
// per active pod): ns/pod is flat when admitting n pods is linear in n.
func BenchmarkUpdateQoS(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := make([]*v1.Pod, n)
			for i := range pods {
				switch i % 3 {
				case 0:
					pods[i] = podOf(fmt.Sprint("b", i), ctr("a", rl("cpu", "10m", "memory", "16Mi"), nil))
				case 1:
					pods[i] = podOf(fmt.Sprint("g", i), ctr("a", rl("cpu", "1", "memory", "16Mi"), rl("cpu", "1", "memory", "16Mi")))
				default:
					pods[i] = podOf(fmt.Sprint("be", i), ctr("a", nil, nil))
				}
			}
			inner, err := cgroup.Open(cgrouptest.V2(b))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				pm, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Manager: nopUpdates{inner}, MemoryQoS: true})
				if err != nil {
					b.Fatal(err)
				}
				// The first call sets the node cgroups up: not counted.
				if err := pm.UpdateQoS(nil); err != nil {
					b.Fatal(err)
				}
				active := make([]*v1.Pod, 0, 16)
				b.StartTimer()
				for _, p := range pods {
					active = append(active, p)
					if err := pm.UpdateQoS(active); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pod")
			b.ReportMetric(0, "ns/op")
		})
	}
}
