package cgroup_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

// housekeep does what an agent's housekeeping does with its pod cgroups:
// destroys those Pods lists that no pod of keep has.
func housekeep(t *testing.T, pm *cgroup.PodManager, keep ...*v1.Pod) {
	t.Helper()
	uids, err := pm.Pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range uids {
		if slices.ContainsFunc(keep, func(p *v1.Pod) bool { return p.UID == uid }) {
			continue
		}
		if err := pm.DestroyPod(t.Context(), uid); err != nil {
			t.Fatal(err)
		}
	}
}

// sharedRoot runs two agents' pod managers whose pod cgroups share one
// Root, each with its own StateDir (newPM makes one): each lists only its
// own pod cgroups; after agent A restarts (a new manager on its
// StateDir) and none of its pods is wanted, its housekeeping removes its
// own and leaves B's; B's housekeeping leaves A's. exists tells whether
// a pod's cgroup is there.
func sharedRoot(t *testing.T, newPM func(stateDir string) *cgroup.PodManager, pods [3]*v1.Pod, exists func(pm *cgroup.PodManager, p *v1.Pod) bool) {
	stateA, stateB := t.TempDir(), t.TempDir()
	a, b := newPM(stateA), newPM(stateB)
	a1, a2, b1 := pods[0], pods[1], pods[2]
	for _, c := range []struct {
		pm  *cgroup.PodManager
		pod *v1.Pod
	}{{a, a1}, {a, a2}, {b, b1}} {
		if _, err := c.pm.EnsurePod(c.pod); err != nil {
			t.Fatal(err)
		}
	}
	sorted := func(ps ...*v1.Pod) []types.UID {
		var out []types.UID
		for _, p := range ps {
			out = append(out, p.UID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		name string
		pm   *cgroup.PodManager
		want []types.UID
	}{{"A", a, sorted(a1, a2)}, {"B", b, sorted(b1)}} {
		got, err := c.pm.Pods()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("agent %s's pod cgroups (-want +got):\n%s", c.name, diff)
		}
	}

	// B's housekeeping, with its pod wanted: A's pods are not its own.
	housekeep(t, b, b1)
	// A restarts; none of its pods is wanted any more.
	a = newPM(stateA)
	housekeep(t, a)
	for _, c := range []struct {
		pod  *v1.Pod
		want bool
	}{{a1, false}, {a2, false}, {b1, true}} {
		if got := exists(a, c.pod); got != c.want {
			t.Errorf("pod %s's cgroup exists: %v, want %v", c.pod.UID, got, c.want)
		}
	}
	if es, err := os.ReadDir(stateA); err != nil || len(es) != 0 {
		t.Errorf("A's records after its pods' cgroups went: %v, %v", es, err)
	}
	// A record whose cgroup is gone (removed by hand, or a crash between
	// the record and the cgroup) is dropped.
	if err := os.WriteFile(filepath.Join(stateA, "gone"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if uids, err := a.Pods(); err != nil || len(uids) != 0 {
		t.Errorf("A's pod cgroups with a record of a gone one: %v, %v", uids, err)
	}
	if _, err := os.Stat(filepath.Join(stateA, "gone")); !os.IsNotExist(err) {
		t.Errorf("the record of a gone cgroup is still there: %v", err)
	}
	if err := b.DestroyPod(t.Context(), b1.UID); err != nil {
		t.Fatal(err)
	}
	if es, err := os.ReadDir(stateB); err != nil || len(es) != 0 {
		t.Errorf("B's records after DestroyPod: %v, %v", es, err)
	}
}

// TestPodManagersShareRoot: two agents' pod managers on one (emulated
// v2) cgroup hierarchy with the default Root.
func TestPodManagersShareRoot(t *testing.T) {
	root := cgrouptest.V2(t)
	sharedRoot(t, func(stateDir string) *cgroup.PodManager {
		return newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root, StateDir: stateDir})
	}, [3]*v1.Pod{
		podOf("a1", ctr("c", nil, nil)),
		podOf("a2", ctr("c", rl("cpu", "100m"), nil)),
		podOf("b1", ctr("c", nil, nil)),
	}, func(pm *cgroup.PodManager, p *v1.Pod) bool { return pm.PodExists(p) })
}

// TestHostPodManagersShareDefaultRoot, as root: two agents' pod managers
// on the host's cgroups with the default Root ("kubepods", which other
// agents on the host may use too: the test touches only its own pods,
// and removes the node cgroups at the end only when it made them and
// they are empty).
func TestHostPodManagersShareDefaultRoot(t *testing.T) {
	needRoot(t)
	info, err := cgroup.Detect("")
	if err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	mgr, err := cgroup.NewManager(info)
	if err != nil {
		t.Fatal(err)
	}
	made := !mgr.Exists("/kubepods")
	b := make([]byte, 6)
	rand.Read(b)
	id := "nodekit-test-" + hex.EncodeToString(b)
	pods := [3]*v1.Pod{
		podOf(id+"-a1", ctr("c", nil, nil)),
		podOf(id+"-a2", ctr("c", rl("cpu", "100m"), nil)),
		podOf(id+"-b1", ctr("c", nil, nil)),
	}
	clean := newPM(t, cgroup.PodManagerOptions{}) // DestroyPod takes any pod
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range pods {
			if err := clean.DestroyPod(ctx, p.UID); err != nil {
				t.Errorf("cleanup of pod %s: %v", p.UID, err)
			}
		}
		if made {
			for _, c := range []string{"/kubepods/besteffort", "/kubepods/burstable", "/kubepods"} {
				if children, err := mgr.Children(c); err == nil && len(children) == 0 {
					mgr.Destroy(ctx, c)
				}
			}
		}
	})
	sharedRoot(t, func(stateDir string) *cgroup.PodManager {
		return newPM(t, cgroup.PodManagerOptions{StateDir: stateDir})
	}, pods, func(pm *cgroup.PodManager, p *v1.Pod) bool { return mgr.Exists(pm.CgroupName(p)) })
}
