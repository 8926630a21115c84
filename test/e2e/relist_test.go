package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// decodedLister hides a runtime's runtime.WireLister: a relist through it
// decodes the answers whole.
type decodedLister struct{ pleg.Lister }

// TestRelistWireForm: against containerd 1.6 and 2.x, the list answers
// in wire form (runtime.WireLister, through the agent's scoped runtime)
// decode to the decoded lists, and a relisting PLEG reading them finds
// the events that one decoding them finds, for running and exited
// containers.
func TestRelistWireForm(t *testing.T) {
	for _, tc := range []struct{ name, endpointVar string }{
		{"containerd 1.6", envEndpoint},
		{"containerd 2.x", envEndpoint2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.endpointVar)
			a := f.agent(nil, "wire relist")
			f.write(podSpec{name: "loop", script: loopScript})
			f.write(podSpec{name: "done", restartPolicy: v1.RestartPolicyNever, script: "exit 0"})
			eventually(t, 60*time.Second, "both pods started", func() bool {
				return a.running(f.pod("loop")) && a.phase(f.pod("done")) == v1.PodSucceeded
			})
			// The agent stops done's sandbox once its container has
			// exited: wait for that, then stop the agent, so that nothing
			// changes between the lists and the relists compared below.
			eventually(t, 60*time.Second, "done's sandbox stopped", func() bool {
				sbs, _ := podObjects(t, f.cri, a.podUID(f.pod("done")))
				return len(sbs) == 1 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			})
			if err := a.stop(); err != nil {
				t.Fatalf("Agent.Run: %v", err)
			}
			ctx := t.Context()
			rs := runtime.WithIdentity(f.cri, f.node)
			wl, ok := rs.(runtime.WireLister)
			if !ok {
				t.Fatal("the scoped CRI client is no runtime.WireLister")
			}

			byID := protocmp.SortRepeated(func(a, b *runtimeapi.PodSandbox) bool { return a.Id < b.Id })
			byCID := protocmp.SortRepeated(func(a, b *runtimeapi.Container) bool { return a.Id < b.Id })
			sbs, err := rs.ListPodSandbox(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := wl.ListPodSandboxWire(ctx, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var sbResp runtimeapi.ListPodSandboxResponse
			if err := proto.Unmarshal(b, &sbResp); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(&runtimeapi.ListPodSandboxResponse{Items: sbs}, &sbResp, protocmp.Transform(), byID); d != "" || len(sbs) != 2 {
				t.Errorf("sandboxes (-decoded +wire), want 2:\n%s", d)
			}
			cs, err := rs.ListContainers(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err = wl.ListContainersWire(ctx, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var csResp runtimeapi.ListContainersResponse
			if err := proto.Unmarshal(b, &csResp); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(&runtimeapi.ListContainersResponse{Containers: cs}, &csResp, protocmp.Transform(), byCID); d != "" || len(cs) != 2 {
				t.Errorf("containers (-decoded +wire), want 2:\n%s", d)
			}

			// The first relist of a PLEG reports every container and
			// sandbox it finds: the two must find the same.
			nop := pleg.StatusGetterFunc(func(_ context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
				return &runtime.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
			})
			var events [2][]pleg.Event
			for i, l := range []pleg.Lister{rs, decodedLister{rs}} {
				g, err := pleg.NewGeneric(l, nop, pleg.NewCache(), pleg.GenericOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Relist(ctx); err != nil {
					t.Fatal(err)
				}
				for len(g.Events()) > 0 {
					events[i] = append(events[i], *<-g.Events())
				}
			}
			sortEvents := cmpopts.SortSlices(func(a, b pleg.Event) bool {
				return strings.Compare(string(a.ID)+a.Data+string(a.Type), string(b.ID)+b.Data+string(b.Type)) < 0
			})
			if d := cmp.Diff(events[1], events[0], sortEvents); d != "" {
				t.Errorf("first relist's events (-decoded +wire):\n%s", d)
			}
			var started, died int
			for _, e := range events[0] {
				switch e.Type {
				case pleg.ContainerStarted:
					started++
				case pleg.ContainerDied:
					died++
				}
			}
			// Running: loop's sandbox and container. Exited: done's
			// container and its sandbox, which the agent stopped.
			if started != 2 || died != 2 {
				t.Errorf("first relist's events = %v; want the 2 sandboxes and 2 containers, loop's running, done's container exited", events[0])
			}
		})
	}
}
