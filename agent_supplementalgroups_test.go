package nodekit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// strictGroupsRuntime is the in-memory runtime declaring support for the
// Strict supplemental groups policy in its Status.
type strictGroupsRuntime struct{ *runtimetest.Runtime }

func (r strictGroupsRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := r.Runtime.Status(ctx, verbose)
	if err == nil {
		resp.Features = &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}
	}
	return resp, err
}

// TestAgentSupplementalGroupsPolicy: a pod asking for the Strict
// supplemental groups policy is rejected with the kubelet's reason on a
// runtime that does not declare support for it, and runs on one that
// does; a pod with Merge runs on both.
func TestAgentSupplementalGroupsPolicy(t *testing.T) {
	for _, supported := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			mem := runtimetest.New(runtimetest.Options{})
			defer mem.Close()
			src := make(chanSource, 1)
			opts := nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}}
			if supported {
				opts.Runtime, opts.Images = strictGroupsRuntime{mem}, mem
			}
			h := startAgent(t, mem, opts)
			withPolicy := func(name string, p v1.SupplementalGroupsPolicy) *v1.Pod {
				pod := testPod(name, v1.RestartPolicyAlways, nil, "sleep 3600")
				pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &p}
				return pod
			}
			time.Sleep(2 * time.Second) // the runtime's Status read
			src <- []*v1.Pod{withPolicy("strict", v1.SupplementalGroupsPolicyStrict), withPolicy("merge", v1.SupplementalGroupsPolicyMerge)}
			time.Sleep(5 * time.Second)
			synctest.Wait()

			if !h.running("default/merge") {
				t.Error("the Merge pod is not running")
			}
			s, _ := h.status("default/strict")
			switch {
			case supported && !h.running("default/strict"):
				t.Errorf("runtime supports Strict: the Strict pod is not running: %s %q", s.Phase, s.Reason)
			case !supported && (s.Phase != v1.PodFailed || s.Reason != "SupplementalGroupsPolicyNotSupported" ||
				s.Message != "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node"):
				t.Errorf("runtime without Strict: the Strict pod's status = %s %q %q, want Failed SupplementalGroupsPolicyNotSupported", s.Phase, s.Reason, s.Message)
			}
		})
	}
}
