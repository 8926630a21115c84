package nodekit_test

import (
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentUserNamespaces: the agent gives hostUsers: false pods to its
// user namespace manager by default, which asks the runtime's handlers
// (the in-memory runtime reports none: the kubelet's error); with
// UserNamespaces.Disabled the pod fails with podruntime.ErrUserNamespaces;
// a bad IDsPerPod fails New.
func TestAgentUserNamespaces(t *testing.T) {
	checkLeaks(t)
	for _, tc := range []struct {
		name string
		opts nodekit.UserNamespacesOptions
		want string
	}{
		{"default", nodekit.UserNamespacesOptions{}, "can't set `spec.hostUsers: false`, runtime does not support user namespaces: runtime handlers are not set"},
		{"disabled", nodekit.UserNamespacesOptions{Disabled: true}, "hostUsers: false (user namespaces) is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := runtimetest.New(runtimetest.Options{})
			defer rt.Close()
			src := make(chanSource, 1)
			h := startAgent(t, rt, nodekit.Options{
				Sources:        []nodekit.NamedSource{{Name: "test", Source: src}},
				UserNamespaces: tc.opts,
			})
			pod := testPod("userns", v1.RestartPolicyAlways, nil, "sleep 3600")
			pod.Spec.HostUsers = ptr(false)
			host := testPod("host", v1.RestartPolicyAlways, nil, "sleep 3600")
			src <- []*v1.Pod{pod, host}
			eventually(t, waitTimeout, "the sandbox error logged", func() bool { return h.logs.contains(tc.want) })
			eventually(t, waitTimeout, "the host-users pod running", func() bool { return h.running("default/host") })
			if len(h.sandboxes()) != 1 {
				t.Errorf("sandboxes: %v, want the host-users pod's only", h.sandboxes())
			}
		})
	}
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	_, err := nodekit.New(nodekit.Options{NodeName: "n", Runtime: rt, RootDir: t.TempDir(), Logger: logr.Discard(),
		Sources:        []nodekit.NamedSource{{Name: "test", Source: make(chanSource)}},
		UserNamespaces: nodekit.UserNamespacesOptions{IDsPerPod: 1000}})
	if err == nil || err.Error() != "nodekit: userns: kubelet user namespace length 1000 is not a multiple of 65536" {
		t.Errorf("New with IDsPerPod 1000: %v", err)
	}
}
