package node_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/node"
)

func handler(name string, rro, userns bool) v1.NodeRuntimeHandler {
	return v1.NodeRuntimeHandler{Name: name, Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}}
}

// TestRuntimeHandlers: the kubelet's RuntimeHandlers setter (and its
// conversion of the CRI Status response): every handler in the runtime's
// order, both features always set, false without features.
func TestRuntimeHandlers(t *testing.T) {
	tests := []struct {
		name string
		in   []*runtimeapi.RuntimeHandler
		want []v1.NodeRuntimeHandler
	}{
		{"none", nil, []v1.NodeRuntimeHandler{}},
		{"default and named handlers", []*runtimeapi.RuntimeHandler{
			{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
			{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
			{Name: "kata", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
		}, []v1.NodeRuntimeHandler{handler("", true, true), handler("runc", true, false), handler("kata", false, true)}},
		{"no features reported", []*runtimeapi.RuntimeHandler{{Name: "old"}}, []v1.NodeRuntimeHandler{handler("old", false, false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := node.RuntimeHandlers(tt.in)
			if got == nil {
				t.Fatal("RuntimeHandlers() = nil, want a list")
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestStatusRuntimeHandlers: the Node is registered with the runtime's
// handlers, a change of them is reported at the next status update, and a
// failed read keeps the Node's.
func TestStatusRuntimeHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		type answer struct {
			hs  []*runtimeapi.RuntimeHandler
			err error
		}
		var cur atomic.Pointer[answer]
		cur.Store(&answer{hs: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}}}})
		stop := start(t, newController(t, c, node.Options{
			RuntimeHandlers: func(context.Context) ([]*runtimeapi.RuntimeHandler, error) {
				a := cur.Load()
				return a.hs, a.err
			},
		}))
		synctest.Wait()
		if d := cmp.Diff([]v1.NodeRuntimeHandler{handler("", true, false)}, getNode(t, c).Status.RuntimeHandlers); d != "" {
			t.Errorf("registered runtimeHandlers (-want +got):\n%s", d)
		}

		cur.Store(&answer{hs: []*runtimeapi.RuntimeHandler{
			{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
			{Name: "kata", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
		}})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []v1.NodeRuntimeHandler{handler("", true, true), handler("kata", false, true)}
		if d := cmp.Diff(want, getNode(t, c).Status.RuntimeHandlers); d != "" {
			t.Errorf("runtimeHandlers after a change (-want +got):\n%s", d)
		}

		cur.Store(&answer{err: errors.New("runtime: status: unavailable")})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if d := cmp.Diff(want, getNode(t, c).Status.RuntimeHandlers); d != "" {
			t.Errorf("runtimeHandlers after a failed read (-want +got):\n%s", d)
		}
		stop()
	})
}

// TestRuntimeFeatures: the kubelet's NodeFeatures setter: a runtime's
// features give supplementalGroupsPolicy, always set; no features give
// nil (the Node's are left alone).
func TestRuntimeFeatures(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name string
		in   *runtimeapi.RuntimeFeatures
		want *v1.NodeFeatures
	}{
		{name: "none", in: nil, want: nil},
		{name: "supported", in: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}, want: &v1.NodeFeatures{SupplementalGroupsPolicy: &yes}},
		{name: "not supported", in: &runtimeapi.RuntimeFeatures{UserNamespacesHostNetwork: true}, want: &v1.NodeFeatures{SupplementalGroupsPolicy: &no}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, node.RuntimeFeatures(tt.in)); d != "" {
				t.Errorf("RuntimeFeatures() (-want +got):\n%s", d)
			}
		})
	}
}

// TestStatusFeatures: the Node is registered with the runtime's
// features as status.features, a change is reported at the next status
// update, and a failed read or a runtime that reports none keeps the
// Node's.
func TestStatusFeatures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		type answer struct {
			f   *runtimeapi.RuntimeFeatures
			err error
		}
		var cur atomic.Pointer[answer]
		cur.Store(&answer{f: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}})
		stop := start(t, newController(t, c, node.Options{
			RuntimeFeatures: func(context.Context) (*runtimeapi.RuntimeFeatures, error) {
				a := cur.Load()
				return a.f, a.err
			},
		}))
		yes, no := true, false
		synctest.Wait()
		if d := cmp.Diff(&v1.NodeFeatures{SupplementalGroupsPolicy: &yes}, getNode(t, c).Status.Features); d != "" {
			t.Errorf("registered features (-want +got):\n%s", d)
		}

		cur.Store(&answer{f: &runtimeapi.RuntimeFeatures{}})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := &v1.NodeFeatures{SupplementalGroupsPolicy: &no}
		if d := cmp.Diff(want, getNode(t, c).Status.Features); d != "" {
			t.Errorf("features after a change (-want +got):\n%s", d)
		}

		for _, a := range []*answer{{err: errors.New("runtime: status: unavailable")}, {f: nil}} {
			cur.Store(a)
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if d := cmp.Diff(want, getNode(t, c).Status.Features); d != "" {
				t.Errorf("features after a read giving %v, %v (-want +got):\n%s", a.f, a.err, d)
			}
		}
		stop()
	})
}

// TestStatusNoFeatures: without RuntimeFeatures (or with a runtime that
// reports none) the Node has no status.features.
func TestStatusNoFeatures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		stop := start(t, newController(t, c, node.Options{
			RuntimeFeatures: func(context.Context) (*runtimeapi.RuntimeFeatures, error) { return nil, nil },
		}))
		synctest.Wait()
		if f := getNode(t, c).Status.Features; f != nil {
			t.Errorf("status.features = %+v, want none", f)
		}
		stop()
	})
}
