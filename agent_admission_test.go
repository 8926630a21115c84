package nodekit_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentAdmissionDefaults: the agent runs the kubelet's checks in the
// kubelet's order. Each rejected pod gets phase Failed with the check's
// reason, a Warning event with its message, and never reaches the
// runtime; an allowed unsafe sysctl, a host port once and a pod that fits
// run.
func TestAgentAdmissionDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		rec := record.NewFakeRecorder(1000)
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{
			Events:               rec,
			AllowedUnsafeSysctls: []string{"kernel.msg*"},
			Sources:              []nodekit.NamedSource{{Name: "test", Source: src}},
			Node:                 node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
		})
		sysctl := func(name string) func(*v1.Pod) {
			return func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: name, Value: "1"}}}
			}
		}
		cpu := func(q string) func(*v1.Pod) {
			return func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)}
			}
		}
		hostPort := func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}} }
		tests := []struct {
			name, reason, message string
			mutate                func(*v1.Pod)
		}{
			{name: "fits", mutate: cpu("1500m")},
			{name: "allowed-sysctl", mutate: sysctl("kernel.msgmax")},
			{name: "port", mutate: hostPort},
			{name: "unsafe-sysctl", mutate: sysctl("kernel.sem"), reason: "SysctlForbidden", message: `forbidden sysctl: "kernel.sem" not allowlisted`},
			{name: "windows", mutate: func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }, reason: "PodOSNotSupported",
				message: "Failed to admit pod as the OS field doesn't match node OS"},
			{name: "too-big", mutate: cpu("1"), reason: "OutOfcpu", message: "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
			{name: "other-node", mutate: func(p *v1.Pod) { p.Spec.NodeName = "elsewhere" }, reason: "NodeName",
				message: "Predicate NodeName failed: node(s) didn't match the requested node name"},
			{name: "selector", mutate: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"gpu": "yes"} }, reason: "NodeAffinity",
				message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
			{name: "port-taken", mutate: hostPort, reason: "NodePorts",
				message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
			{name: "negative", mutate: cpu("-1"), reason: "InvalidResources", message: `container "c0": cpu request -1 is negative`},
		}
		var pods []*v1.Pod
		for i, tt := range tests {
			p := testPod(tt.name, v1.RestartPolicyAlways, nil, "sleep 3600")
			p.CreationTimestamp.Time = time.Unix(int64(i), 0) // admitted in this order
			tt.mutate(p)
			pods = append(pods, p)
		}
		src <- pods
		time.Sleep(5 * time.Second)
		synctest.Wait()

		var events []string
		for len(rec.Events) > 0 {
			events = append(events, <-rec.Events)
		}
		for _, tt := range tests {
			s, _ := h.status("default/" + tt.name)
			if tt.reason == "" {
				if !h.running("default/" + tt.name) {
					t.Errorf("%s: not running (status %s/%s %s)", tt.name, s.Phase, s.Reason, s.Message)
				}
				continue
			}
			if s.Phase != v1.PodFailed || s.Reason != tt.reason || s.Message != "Pod was rejected: "+tt.message {
				t.Errorf("%s: status %s/%s %q, want Failed/%s %q", tt.name, s.Phase, s.Reason, s.Message, tt.reason, "Pod was rejected: "+tt.message)
			}
			if want := "Warning " + tt.reason + " " + tt.message; !slices.Contains(events, want) {
				t.Errorf("%s: no event %q in %q", tt.name, want, events)
			}
		}
		if n := len(h.sandboxes()); n != 3 {
			t.Errorf("%d sandboxes, want 3: the rejected pods never reach the runtime", n)
		}
		for _, e := range events {
			if strings.Contains(e, "sem") && !strings.HasPrefix(e, "Warning SysctlForbidden") {
				t.Errorf("unexpected event for the rejected pod: %q", e)
			}
		}
	})
}
