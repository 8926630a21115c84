package cgroup_test

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cgroup"
)

func TestValidatePodResources(t *testing.T) {
	capacity := rl("cpu", "2", "memory", "4Gi", "pods", "110")
	withInit := func(p *v1.Pod, init ...v1.Container) *v1.Pod { p.Spec.InitContainers = init; return p }
	tests := []struct {
		name       string
		pod        *v1.Pod
		noCapacity bool   // check with a nil capacity
		want       string // "" for no error
	}{{
		name: "fits",
		pod:  podOf("ok", ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "4", "memory", "8Gi"))),
	}, {
		name: "besteffort fits anywhere",
		pod:  podOf("ok", ctr("a", nil, nil)),
	}, {
		name: "negative request",
		pod:  podOf("neg", ctr("app", rl("cpu", "-100m"), nil)),
		want: `cgroup: pod default/pod-neg container "app": cpu request -100m is negative`,
	}, {
		name: "negative limit of an extended resource",
		pod:  podOf("neg", ctr("app", nil, rl("example.com/gpu", "-1"))),
		want: `cgroup: pod default/pod-neg container "app": example.com/gpu limit -1 is negative`,
	}, {
		name:       "absurd memory limit",
		pod:        podOf("big", ctr("app", nil, rl("memory", "100Ei"))),
		noCapacity: true,
		want:       `cgroup: pod default/pod-big container "app": memory limit 9223372036854775807 is too large`,
	}, {
		name:       "absurd cpu limit",
		pod:        podOf("big", ctr("app", nil, rl("cpu", "1e12"))),
		noCapacity: true,
		want:       `cgroup: pod default/pod-big container "app": cpu limit 1e12 is too large`,
	}, {
		name: "limit below request",
		pod:  podOf("inv", ctr("app", rl("memory", "128Mi"), rl("memory", "64Mi"))),
		want: `cgroup: pod default/pod-inv container "app": memory limit 64Mi is below its request 128Mi`,
	}, {
		name: "container request beyond the node",
		pod:  podOf("huge", ctr("app", rl("cpu", "1000"), nil)),
		want: `cgroup: pod default/pod-huge container "app": cpu request 1k exceeds the node's capacity 2`,
	}, {
		name: "init container request beyond the node",
		pod:  withInit(podOf("huge", ctr("app", nil, nil)), ctr("setup", rl("memory", "5Gi"), nil)),
		want: `cgroup: pod default/pod-huge container "setup": memory request 5Gi exceeds the node's capacity 4Gi`,
	}, {
		name: "containers that fit one by one but not together",
		pod:  podOf("sum", ctr("a", rl("cpu", "1500m"), nil), ctr("b", rl("cpu", "1"), nil)),
		want: `cgroup: pod default/pod-sum: cpu requests of the pod, 2500m in all, exceed the node's capacity 2`,
	}, {
		name:       "without capacity only the spec is checked",
		pod:        podOf("sum", ctr("a", rl("cpu", "1500"), nil)),
		noCapacity: true,
	}, {
		name: "limits beyond the node are allowed",
		pod:  podOf("over", ctr("a", rl("cpu", "1"), rl("cpu", "64", "memory", "1Ti"))),
	}, {
		name: "pod-level limit below request",
		pod: func() *v1.Pod {
			p := podOf("pl", ctr("a", nil, nil))
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "2"), Limits: rl("cpu", "1")}
			return p
		}(),
		want: `cgroup: pod default/pod-pl: cpu (pod-level) limit 1 is below its request 2`,
	}, {
		name: "negative overhead",
		pod: func() *v1.Pod {
			p := podOf("oh", ctr("a", nil, nil))
			p.Spec.Overhead = rl("memory", "-1Mi")
			return p
		}(),
		want: `cgroup: pod default/pod-oh: memory (overhead) request -1Mi is negative`,
	}, {
		name: "overhead pushes the pod beyond the node",
		pod: func() *v1.Pod {
			p := podOf("oh", ctr("a", rl("memory", "4Gi"), nil))
			p.Spec.Overhead = rl("memory", "1Mi")
			return p
		}(),
		want: `cgroup: pod default/pod-oh: memory requests of the pod, 4097Mi in all, exceed the node's capacity 4Gi`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capacity
			if tt.noCapacity {
				c = nil
			}
			err := cgroup.ValidatePodResources(tt.pod, c)
			if tt.want == "" {
				if err != nil {
					t.Errorf("ValidatePodResources = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("ValidatePodResources = %v\nwant                   %s", err, tt.want)
			}
			var re *cgroup.ResourceError
			if !errors.Is(err, cgroup.ErrInvalidResources) || !errors.As(err, &re) {
				t.Fatalf("%v does not match ErrInvalidResources / ResourceError", err)
			}
			if want := strings.Contains(tt.want, "capacity"); re.OutOfCapacity != want {
				t.Errorf("OutOfCapacity = %v, want %v", re.OutOfCapacity, want)
			}
		})
	}
}
