package runtimehealth

import (
	"context"
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
)

// statusRuntime answers Status with resp (or err), counting the calls.
type statusRuntime struct {
	runtime.RuntimeService
	resp  *runtimeapi.StatusResponse
	err   error
	calls int
}

func (s *statusRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	s.calls++
	return s.resp, s.err
}

// TestNodeRuntimeHandlers: the Node's runtime handlers are those of the
// last Status the runtime health check read while RuntimeReady was true,
// read without a Status call of their own; before any such Status they
// are not known (the Node's stay), and a Status of a runtime not ready,
// or failing, keeps the last ones, as the kubelet's updateRuntimeUp.
func TestNodeRuntimeHandlers(t *testing.T) {
	ctx := context.Background()
	ready := func(ok bool, names ...string) *runtimeapi.StatusResponse {
		resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: ok}, {Type: runtimeapi.NetworkReady, Status: true},
		}}}
		for _, n := range names {
			resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: n})
		}
		return resp
	}
	names := func(hs []*runtimeapi.RuntimeHandler) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.GetName())
		}
		return out
	}
	fake := &statusRuntime{resp: ready(false, "never")}
	// The Node's options take the cache before the runtime is set.
	c := &HandlerCache{}
	o := node.Options{RuntimeHandlers: c.Handlers}
	c.RuntimeService = fake
	rs := c
	check := func(label string, want []string, wantErr bool) {
		t.Helper()
		before := fake.calls
		hs, err := o.RuntimeHandlers(ctx)
		if (err != nil) != wantErr {
			t.Errorf("%s: error %v, want error %v", label, err, wantErr)
		}
		if got := names(hs); len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) || (len(want) > 1 && got[1] != want[1]) {
			t.Errorf("%s: handlers %v, want %v", label, got, want)
		}
		if fake.calls != before {
			t.Errorf("%s: %d Status calls to read the handlers, want none", label, fake.calls-before)
		}
	}
	check("before any Status", nil, true)
	if _, err := rs.Status(ctx, false); err != nil {
		t.Fatal(err)
	}
	check("runtime not ready", nil, true)
	fake.resp = ready(true, "", "runc")
	if _, err := rs.Status(ctx, false); err != nil {
		t.Fatal(err)
	}
	check("runtime ready", []string{"", "runc"}, false)
	fake.resp = ready(false, "other")
	if _, err := rs.Status(ctx, false); err != nil {
		t.Fatal(err)
	}
	check("runtime no longer ready", []string{"", "runc"}, false)
	fake.resp, fake.err = nil, errors.New("unavailable")
	if _, err := rs.Status(ctx, false); err == nil {
		t.Fatal("Status error not passed on")
	}
	check("Status failed", []string{"", "runc"}, false)
}

// TestNodeRuntimeFeatures: the Node's runtime features are those of the
// last Status of a ready runtime, as the kubelet's runtimeState keeps
// them: not known before one (the Node's stay), nil when the runtime
// reports none (containerd 1.6), kept across a Status of a runtime not
// ready, and replaced, nil included, by the next ready one.
func TestNodeRuntimeFeatures(t *testing.T) {
	ctx := context.Background()
	status := func(ready bool, f *runtimeapi.RuntimeFeatures) *runtimeapi.StatusResponse {
		return &runtimeapi.StatusResponse{
			Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
				{Type: runtimeapi.RuntimeReady, Status: ready}, {Type: runtimeapi.NetworkReady, Status: true},
			}},
			Features: f,
		}
	}
	fake := &statusRuntime{resp: status(false, &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true})}
	c := &HandlerCache{}
	o := node.Options{RuntimeFeatures: c.Features}
	c.RuntimeService = fake
	check := func(label string, want *runtimeapi.RuntimeFeatures, wantErr bool) {
		t.Helper()
		before := fake.calls
		f, err := o.RuntimeFeatures(ctx)
		if (err != nil) != wantErr {
			t.Errorf("%s: error %v, want error %v", label, err, wantErr)
		}
		if (f == nil) != (want == nil) || f.GetSupplementalGroupsPolicy() != want.GetSupplementalGroupsPolicy() {
			t.Errorf("%s: features %v, want %v", label, f, want)
		}
		if fake.calls != before {
			t.Errorf("%s: %d Status calls to read the features, want none", label, fake.calls-before)
		}
	}
	step := func(resp *runtimeapi.StatusResponse) {
		t.Helper()
		fake.resp = resp
		if _, err := c.Status(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	check("before any Status", nil, true)
	step(fake.resp)
	check("runtime not ready", nil, true)
	step(status(true, nil))
	check("ready runtime without features", nil, false)
	step(status(true, &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}))
	check("ready runtime with features", &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}, false)
	step(status(false, nil))
	check("runtime no longer ready", &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}, false)
}
