package nodekit_test

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentsShareARuntime: two agents of different node names on one
// runtime each run their own pod and leave the other's alone, through
// relists, housekeeping (orphan removal) and the event stream, for a minute
// of fake time; then one agent's pod goes and only that pod is removed.
func TestAgentsShareARuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		var srcs []chanSource
		var hs []*harness
		for _, name := range []string{"node-a", "node-b"} {
			src := make(chanSource, 1)
			h := startAgent(t, rt, nodekit.Options{NodeName: name, Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
			src <- []*v1.Pod{testPod("p-"+name, v1.RestartPolicyAlways, nil, "sleep 3600")}
			srcs, hs = append(srcs, src), append(hs, h)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := rt.Calls("StopContainer") + rt.Calls("StopPodSandbox"); n != 0 {
			t.Errorf("%d stops while both agents run their pods, want 0", n)
		}
		if n := rt.Calls("RunPodSandbox"); n != 2 {
			t.Errorf("%d sandboxes created, want 2", n)
		}
		for i, name := range []string{"node-a", "node-b"} {
			if !hs[i].running("default/p-" + name) {
				t.Errorf("%s: its pod is not running", name)
			}
		}
		owners := map[string]int{}
		for _, s := range hs[0].sandboxes() {
			owners[s.Labels[runtime.LabelAgent]]++
		}
		if owners["node-a"] != 1 || owners["node-b"] != 1 {
			t.Errorf("sandboxes by %s label: %v, want one each of node-a and node-b", runtime.LabelAgent, owners)
		}

		srcs[0] <- nil // node-a's pod goes
		time.Sleep(time.Minute)
		synctest.Wait()
		running, err := rt.ListContainers(t.Context(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			t.Fatal(err)
		}
		if len(running) != 1 || running[0].Labels[runtime.LabelAgent] != "node-b" {
			t.Errorf("running containers after node-a's pod went: %d, want node-b's only", len(running))
		}
		if !hs[1].running("default/p-node-b") {
			t.Error("node-b's pod is not running after node-a removed its own")
		}
	})
}
