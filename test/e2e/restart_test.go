package e2e

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podIDs are the runtime objects of one pod.
type podIDs struct {
	UID        types.UID
	Sandboxes  []string
	Containers []string // running ones
}

// snapshotPod reads a pod's sandboxes and running containers from
// containerd.
func snapshotPod(t *testing.T, f *fixture, uid types.UID) podIDs {
	t.Helper()
	sbs, cs := podObjects(t, f.cri, uid)
	ids := podIDs{UID: uid}
	for _, s := range sbs {
		ids.Sandboxes = append(ids.Sandboxes, s.Id)
	}
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ids.Containers = append(ids.Containers, c.Id)
		}
	}
	slices.Sort(ids.Sandboxes)
	slices.Sort(ids.Containers)
	return ids
}

// TestAgentRestart: an agent stopped (its context cancelled) and started
// again while 5 pods run adopts them: the same containers keep running and
// the new agent makes no CRI call that creates, starts, stops or removes
// any of their sandboxes or containers; a pod whose manifest went away
// while no agent ran is stopped and removed once the new agent's sources
// are ready.
func TestAgentRestart(t *testing.T) {
	f := newFixture(t, envEndpoint)
	rs1, _ := newCounting(f.cri)
	a1 := f.agent(rs1, "first run")
	names := []string{"keep0", "keep1", "keep2", "keep3", "keep4", "gone"}
	for _, n := range names {
		f.write(podSpec{name: n, script: loopScript})
	}
	eventually(t, 60*time.Second, "6 pods Running", func() bool {
		for _, n := range names {
			if !a1.running(f.pod(n)) {
				return false
			}
		}
		return true
	})
	before := map[string]podIDs{}
	for _, n := range names {
		before[n] = snapshotPod(t, f, a1.podUID(f.pod(n)))
		if len(before[n].Sandboxes) != 1 || len(before[n].Containers) != 1 {
			t.Fatalf("%s: %+v, want one sandbox and one running container", n, before[n])
		}
	}
	if err := a1.stop(); err != nil {
		t.Fatalf("first agent: Run: %v", err)
	}
	// The pods outlive their agent.
	for _, n := range names {
		if got := snapshotPod(t, f, before[n].UID); !cmp.Equal(got, before[n]) {
			t.Fatalf("%s changed when the agent stopped: %s", n, cmp.Diff(before[n], got))
		}
	}
	f.remove("gone")

	rs2, calls := newCounting(f.cri)
	restarted := time.Now()
	a2 := f.agent(rs2, "second run")
	keep := names[:5]
	took := eventually(t, 30*time.Second, "5 pods Running in the new agent's status", func() bool {
		for _, n := range keep {
			if !a2.running(f.pod(n)) {
				return false
			}
		}
		return true
	})
	t.Logf("agent restart → 5 pods reported Running: %s", took.Round(time.Millisecond))
	gone := before["gone"].UID
	eventually(t, 30*time.Second, "the removed pod's sandbox and container removed", func() bool {
		sbs, cs := podObjects(t, f.cri, gone)
		return len(sbs) == 0 && len(cs) == 0
	})
	t.Logf("agent restart → pod removed while it was down cleaned up: %s", time.Since(restarted).Round(time.Millisecond))
	// Give the agent a few sync and housekeeping periods to do anything
	// it should not.
	time.Sleep(5 * time.Second)

	owned := map[string]bool{} // sandbox and container IDs of the kept pods
	uids := map[types.UID]bool{}
	for _, n := range keep {
		ids := before[n]
		uids[ids.UID] = true
		for _, id := range slices.Concat(ids.Sandboxes, ids.Containers) {
			owned[id] = true
		}
		if got := snapshotPod(t, f, ids.UID); !cmp.Equal(got, ids) {
			t.Errorf("%s: the runtime objects changed across the restart: %s", n, cmp.Diff(ids, got))
		}
		s, _ := a2.status(f.pod(n))
		c := s.ContainerStatuses[0]
		if c.ContainerID != "containerd://"+ids.Containers[0] || c.RestartCount != 0 {
			t.Errorf("%s: status names container %s with %d restarts, want %s with none", n, c.ContainerID, c.RestartCount, ids.Containers[0])
		}
	}
	perMethod := map[string]int{}
	for _, c := range calls.Calls() {
		perMethod[c.Method]++
		if owned[c.ID] || uids[c.PodUID] {
			t.Errorf("the restarted agent called %s on a pod it should have adopted (%s %s)", c.Method, c.ID, c.PodUID)
		}
	}
	t.Logf("state-changing CRI calls of the restarted agent (all for the removed pod): %v", perMethod)
	if perMethod["StopPodSandbox"] == 0 || perMethod["RemovePodSandbox"] == 0 {
		t.Errorf("the removed pod was not stopped and removed through the agent: calls %v", perMethod)
	}
}

// TestContainerdRestart: containerd stopped for 10 s (its daemon killed;
// shims and containers live on, as when a service manager restarts it) and
// started again: the agent reports the runtime unhealthy, then healthy
// again; its pods run the same containers in the same sandboxes, with no
// second sandbox, and the web pod still serves.
func TestContainerdRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("stops containerd for 10s")
	}
	in := startInstance(t, "1.6")
	f := newFixtureAt(t, in.endpoint)
	a := f.agent(nil, "containerd restart")
	f.write(podSpec{name: "loop", script: loopScript})
	f.write(podSpec{name: "web", image: webImage})
	loop, web := f.pod("loop"), f.pod("web")
	eventually(t, 30*time.Second, "pods Running", func() bool { return a.running(loop) && a.running(web) })
	if err := a.agent.Healthy(); err != nil {
		t.Fatalf("Healthy before the outage: %v", err)
	}
	before := map[string]podIDs{loop: snapshotPod(t, f, a.podUID(loop)), web: snapshotPod(t, f, a.podUID(web))}
	checkWeb(t, a, web)

	down := time.Now()
	in.run("kill", "--name", in.name)
	var healthErr error
	eventually(t, 15*time.Second, "the agent to report the runtime unhealthy", func() bool {
		healthErr = a.agent.Healthy()
		return healthErr != nil
	})
	t.Logf("containerd stopped → Healthy() reports %q after %s", healthErr, time.Since(down).Round(time.Millisecond))
	time.Sleep(time.Until(down.Add(10 * time.Second)))

	in.run("start", "--version", "1.6", "--name", in.name)
	up := time.Now()
	took := eventually(t, 30*time.Second, "the agent to report the runtime healthy", func() bool { return a.agent.Healthy() == nil })
	t.Logf("containerd started → Healthy() nil after %s", took.Round(time.Millisecond))
	eventually(t, 30*time.Second, "pods Running", func() bool { return a.running(loop) && a.running(web) })
	// A few sync periods for a duplicate sandbox to appear, if one would.
	time.Sleep(3 * time.Second)
	t.Logf("containerd started → pods Running and settled: %s", time.Since(up).Round(time.Millisecond))
	for _, pod := range []string{loop, web} {
		got := snapshotPod(t, f, a.podUID(pod))
		if diff := cmp.Diff(before[pod], got); diff != "" {
			t.Errorf("%s: sandboxes and running containers changed across the containerd restart (-want +got):\n%s", pod, diff)
		}
		sbs, _ := podObjects(t, f.cri, a.podUID(pod))
		ready := 0
		for _, s := range sbs {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				ready++
			}
		}
		if len(sbs) != 1 || ready != 1 {
			t.Errorf("%s: %d sandboxes, %d ready; want exactly one, ready", pod, len(sbs), ready)
		}
	}
	checkWeb(t, a, web)
}

// checkWeb fetches the web pod's index page from its pod IP.
func checkWeb(t *testing.T, a *agentRun, pod string) {
	t.Helper()
	s, _ := a.status(pod)
	if len(s.PodIPs) == 0 {
		t.Fatalf("%s has no IP", pod)
	}
	url := "http://" + net.JoinHostPort(s.PodIPs[0].IP, "8080") + "/"
	var body string
	eventually(t, 10*time.Second, "GET "+url, func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(body, "hello from nodekit") {
		t.Errorf("GET %s = %q, want the web image's index page", url, body)
	}
}
