package e2e

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// TestAgentsShareContainerd: two agents of different node names on one
// containerd each run their pod and, through relists, housekeeping and
// orphan removal, leave the other's alone; each sandbox carries its
// agent's identity label.
func TestAgentsShareContainerd(t *testing.T) {
	for _, v := range []struct{ name, env string }{{"containerd-1.6", envEndpoint}, {"containerd-2", envEndpoint2}} {
		t.Run(v.name, func(t *testing.T) {
			ep := endpointFrom(t, v.env)
			a, b := newFixtureAt(t, ep), newFixtureAt(t, ep)
			a.write(podSpec{name: "mine", script: sleepScript, hostNetwork: true})
			b.write(podSpec{name: "mine", script: sleepScript, hostNetwork: true})
			ra, rb := a.agent(nil, "agent a"), b.agent(nil, "agent b")
			eventually(t, 2*time.Minute, "both agents' pods running", func() bool {
				return ra.running(a.pod("mine")) && rb.running(b.pod("mine"))
			})
			ids := func(f *fixture, r *agentRun) []string {
				sbs, cs := podObjects(t, f.cri, r.podUID(f.pod("mine")))
				var out []string
				for _, s := range sbs {
					if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
						t.Errorf("%s: sandbox %s is %s", f.node, s.Id, s.State)
					}
					if got := s.Labels[runtime.LabelAgent]; got != f.node {
						t.Errorf("%s: sandbox %s has %s=%q, want the node name", f.node, s.Id, runtime.LabelAgent, got)
					}
					out = append(out, s.Id)
				}
				for _, c := range cs {
					if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
						t.Errorf("%s: container %s is %s", f.node, c.Id, c.State)
					}
					out = append(out, c.Id)
				}
				return out
			}
			beforeA, beforeB := ids(a, ra), ids(b, rb)
			// Several relists and housekeeping passes (every 1s and 2s)
			// of both agents: nothing of either pod may change.
			time.Sleep(8 * time.Second)
			if afterA := ids(a, ra); !slices.Equal(beforeA, afterA) {
				t.Errorf("agent a's pod changed while agent b ran: %v, then %v", beforeA, afterA)
			}
			if afterB := ids(b, rb); !slices.Equal(beforeB, afterB) {
				t.Errorf("agent b's pod changed while agent a ran: %v, then %v", beforeB, afterB)
			}
			if !ra.running(a.pod("mine")) || !rb.running(b.pod("mine")) {
				t.Error("a pod is no longer running")
			}
		})
	}
}
