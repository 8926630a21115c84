package admission

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// rl builds a ResourceList from name, quantity pairs.
func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func pod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func requests(r v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = r }
}

func rejected(reason, message string) Result { return Result{Reason: reason, Message: message} }

type admitCase struct {
	name   string
	pod    *v1.Pod
	active []*v1.Pod
	want   Result
}

func runCases(t *testing.T, h Handler, cases []admitCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, h.Admit(tt.pod, tt.active)); diff != "" {
				t.Errorf("Admit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodCount(t *testing.T) {
	runCases(t, PodCount(2), []admitCase{
		{name: "room", pod: pod("a"), active: []*v1.Pod{pod("b")}, want: Admitted()},
		{name: "full", pod: pod("a"), active: []*v1.Pod{pod("b"), pod("c")},
			want: rejected("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")},
	})
}

func node(mutate ...func(*v1.Node)) NodeFunc {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1", "zone": "a"}},
		Status: v1.NodeStatus{Allocatable: rl("cpu", "2", "memory", "4Gi", "ephemeral-storage", "10Gi",
			"pods", "110", "example.com/gpu", "1")},
	}
	for _, m := range mutate {
		m(n)
	}
	return func() *v1.Node { return n }
}

func TestResourceFit(t *testing.T) {
	withInit := func(c v1.Container) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, c) }
	}
	always := v1.ContainerRestartPolicyAlways
	runCases(t, ResourceFit(node()), []admitCase{
		{name: "besteffort fits", pod: pod("a"), active: []*v1.Pod{pod("b", requests(rl("cpu", "2")))}, want: Admitted()},
		{name: "fits beside the others", pod: pod("a", requests(rl("cpu", "1"))),
			active: []*v1.Pod{pod("b", requests(rl("cpu", "500m")))}, want: Admitted()},
		{name: "cpu counted over the admitted pods", pod: pod("a", requests(rl("cpu", "1500m"))),
			active: []*v1.Pod{pod("b", requests(rl("cpu", "1")))},
			want:   rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000")},
		{name: "memory in bytes", pod: pod("a", requests(rl("memory", "3Gi"))),
			active: []*v1.Pod{pod("b", requests(rl("memory", "2Gi")))},
			want:   rejected("OutOfmemory", "Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, capacity: 4294967296")},
		{name: "cpu before memory", pod: pod("a", requests(rl("cpu", "3", "memory", "5Gi"))),
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000")},
		{name: "ephemeral storage", pod: pod("a", requests(rl("ephemeral-storage", "11Gi"))),
			want: rejected("OutOfephemeral-storage", "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240")},
		{name: "extended resource the node has", pod: pod("a", requests(rl("example.com/gpu", "1"))),
			active: []*v1.Pod{pod("b", requests(rl("example.com/gpu", "1")))},
			want:   rejected("OutOfexample.com/gpu", "Node didn't have enough resource: example.com/gpu, requested: 1, used: 1, capacity: 1")},
		{name: "extended resource the node does not list is not checked", pod: pod("a", requests(rl("example.com/fpga", "4"))), want: Admitted()},
		{name: "hugepages the node lacks", pod: pod("a", requests(rl("hugepages-2Mi", "2Mi", "memory", "1Mi"))),
			want: rejected("OutOfhugepages-2Mi", "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0")},
		{name: "init container larger than the app containers", pod: pod("a", requests(rl("cpu", "100m")), withInit(v1.Container{Name: "init",
			Resources: v1.ResourceRequirements{Requests: rl("cpu", "2500m")}})),
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 2500, used: 0, capacity: 2000")},
		{name: "sidecar adds to the app containers", pod: pod("a", requests(rl("cpu", "1500m")), withInit(v1.Container{Name: "side", RestartPolicy: &always,
			Resources: v1.ResourceRequirements{Requests: rl("cpu", "1")}})),
			want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 2500, used: 0, capacity: 2000")},
		{name: "overhead counts", pod: pod("a", requests(rl("memory", "4Gi")), func(p *v1.Pod) { p.Spec.Overhead = rl("memory", "1Mi") }),
			want: rejected("OutOfmemory", "Node didn't have enough resource: memory, requested: 4296015872, used: 0, capacity: 4294967296")},
		{name: "pod-level requests replace the containers'", pod: pod("a", requests(rl("cpu", "100m")), func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "3"), Limits: rl("cpu", "3")}
		}), want: rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000")},
	})
	runCases(t, ResourceFit(func() *v1.Node { return nil }), []admitCase{
		{name: "no node", pod: pod("a", requests(rl("cpu", "100"))), want: Admitted()},
	})
}

func TestInvalidResources(t *testing.T) {
	withLimits := func(r, l v1.ResourceList) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: l} }
	}
	runCases(t, InvalidResources(), []admitCase{
		{name: "valid", pod: pod("a", withLimits(rl("cpu", "1"), rl("cpu", "64", "memory", "1Ti"))), want: Admitted()},
		{name: "negative request", pod: pod("a", withLimits(rl("cpu", "-100m"), nil)),
			want: rejected("InvalidResources", `container "app": cpu request -100m is negative`)},
		{name: "negative extended limit", pod: pod("a", withLimits(nil, rl("example.com/gpu", "-1"))),
			want: rejected("InvalidResources", `container "app": example.com/gpu limit -1 is negative`)},
		{name: "absurd memory", pod: pod("a", withLimits(nil, rl("memory", "100Ei"))),
			want: rejected("InvalidResources", `container "app": memory limit 9223372036854775807 is too large`)},
		{name: "absurd cpu", pod: pod("a", withLimits(nil, rl("cpu", "1e12"))),
			want: rejected("InvalidResources", `container "app": cpu limit 1e12 is too large`)},
		{name: "limit below request", pod: pod("a", withLimits(rl("memory", "128Mi"), rl("memory", "64Mi"))),
			want: rejected("InvalidResources", `container "app": memory limit 64Mi is below its request 128Mi`)},
		{name: "pod-level", pod: pod("a", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "2"), Limits: rl("cpu", "1")}
		}), want: rejected("InvalidResources", "pod-level resources: cpu limit 1 is below its request 2")},
		{name: "overhead", pod: pod("a", func(p *v1.Pod) { p.Spec.Overhead = rl("memory", "-1Mi") }),
			want: rejected("InvalidResources", "overhead: memory request -1Mi is negative")},
	})
}

func TestNodePredicates(t *testing.T) {
	n := node(func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute},
			{Key: "maintenance", Effect: v1.TaintEffectNoSchedule},
		}
	})
	affinity := func(op v1.NodeSelectorOperator, values ...string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: op, Values: values}}}},
			}}}
		}
	}
	affinityFail := rejected("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
	t.Run("NodeAffinity", func(t *testing.T) {
		runCases(t, NodeAffinity(n), []admitCase{
			{name: "no selector", pod: pod("a"), want: Admitted()},
			{name: "selector matches", pod: pod("a", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }), want: Admitted()},
			{name: "selector does not match", pod: pod("a", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }), want: affinityFail},
			{name: "affinity In matches", pod: pod("a", affinity(v1.NodeSelectorOpIn, "a", "c")), want: Admitted()},
			{name: "affinity NotIn", pod: pod("a", affinity(v1.NodeSelectorOpNotIn, "a")), want: affinityFail},
			{name: "affinity DoesNotExist", pod: pod("a", affinity(v1.NodeSelectorOpDoesNotExist)), want: affinityFail},
		})
	})
	t.Run("NodeName", func(t *testing.T) {
		runCases(t, NodeName(n), []admitCase{
			{name: "unset", pod: pod("a"), want: Admitted()},
			{name: "this node", pod: pod("a", func(p *v1.Pod) { p.Spec.NodeName = "node-1" }), want: Admitted()},
			{name: "another node", pod: pod("a", func(p *v1.Pod) { p.Spec.NodeName = "node-2" }),
				want: rejected("NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name")},
		})
	})
	t.Run("Taints", func(t *testing.T) {
		tolerate := func(tol v1.Toleration) func(*v1.Pod) {
			return func(p *v1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol) }
		}
		taintFail := rejected("TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")
		runCases(t, Taints(n), []admitCase{
			{name: "NoExecute not tolerated", pod: pod("a"), want: taintFail},
			{name: "tolerated by key and value", pod: pod("a", tolerate(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoExecute})), want: Admitted()},
			{name: "tolerated by Exists", pod: pod("a", tolerate(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists})), want: Admitted()},
			{name: "other value", pod: pod("a", tolerate(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "cpu"})), want: taintFail},
			{name: "static pods are not checked", pod: pod("a", func(p *v1.Pod) {
				p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
			}), want: Admitted()},
		})
		runCases(t, Taints(node(func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}, {Key: "x", Effect: v1.TaintEffectPreferNoSchedule}}
		})), []admitCase{{name: "NoSchedule is the scheduler's", pod: pod("a"), want: Admitted()}})
	})
	t.Run("nil node", func(t *testing.T) {
		none := func() *v1.Node { return nil }
		p := pod("a", func(p *v1.Pod) { p.Spec.NodeName = "x"; p.Spec.NodeSelector = map[string]string{"zone": "b"} })
		for _, h := range []Handler{NodeAffinity(none), NodeName(none), Taints(none)} {
			if r := h.Admit(p, nil); !r.Admit {
				t.Errorf("without a node: %+v", r)
			}
		}
	})
}

func TestNodePorts(t *testing.T) {
	port := func(hostIP string, proto v1.Protocol, hostPort int32) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{ContainerPort: 80, HostIP: hostIP, Protocol: proto, HostPort: hostPort})
		}
	}
	always := v1.ContainerRestartPolicyAlways
	sidecarPort := func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Ports: []v1.ContainerPort{{ContainerPort: 9, HostPort: 8080}}}}
	}
	fail := rejected("NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")
	runCases(t, NodePorts(), []admitCase{
		{name: "no host port", pod: pod("a"), active: []*v1.Pod{pod("b", port("", "", 8080))}, want: Admitted()},
		{name: "free port", pod: pod("a", port("", "", 8081)), active: []*v1.Pod{pod("b", port("", "", 8080))}, want: Admitted()},
		{name: "same port, defaults", pod: pod("a", port("", "", 8080)), active: []*v1.Pod{pod("b", port("", v1.ProtocolTCP, 8080))}, want: fail},
		{name: "other protocol", pod: pod("a", port("", v1.ProtocolUDP, 8080)), active: []*v1.Pod{pod("b", port("", "", 8080))}, want: Admitted()},
		{name: "distinct IPs", pod: pod("a", port("10.0.0.1", "", 8080)), active: []*v1.Pod{pod("b", port("10.0.0.2", "", 8080))}, want: Admitted()},
		{name: "all addresses against one", pod: pod("a", port("0.0.0.0", "", 8080)), active: []*v1.Pod{pod("b", port("10.0.0.2", "", 8080))}, want: fail},
		{name: "held by a sidecar", pod: pod("a", port("", "", 8080)), active: []*v1.Pod{pod("b", sidecarPort)}, want: fail},
	})
}

func TestOS(t *testing.T) {
	runCases(t, osCheck("linux"), []admitCase{
		{name: "nothing asked", pod: pod("a"), want: Admitted()},
		{name: "linux", pod: pod("a", func(p *v1.Pod) {
			p.Labels = map[string]string{"kubernetes.io/os": "linux"}
			p.Spec.OS = &v1.PodOS{Name: v1.Linux}
		}), want: Admitted()},
		{name: "label for windows", pod: pod("a", func(p *v1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": "windows"} }),
			want: rejected("PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")},
		{name: "os field windows", pod: pod("a", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }),
			want: rejected("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")},
	})
}

// TestSupplementalGroupsPolicy: a pod asking for the Strict policy is
// admitted only by a node whose status says it supports it, with the
// kubelet's reason and message otherwise; Merge, or no policy, always.
func TestSupplementalGroupsPolicy(t *testing.T) {
	policy := func(p v1.SupplementalGroupsPolicy) func(*v1.Pod) {
		return func(pod *v1.Pod) {
			pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &p}
		}
	}
	nodeWith := func(f *v1.NodeFeatures) NodeFunc {
		return func() *v1.Node { return &v1.Node{Status: v1.NodeStatus{Features: f}} }
	}
	notSupported := rejected("SupplementalGroupsPolicyNotSupported", "SupplementalGroupsPolicy=Strict is not supported in this node")
	for _, tc := range []struct {
		name string
		node NodeFunc
		want map[string]Result // by pod
	}{
		{"supported", nodeWith(&v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}), nil},
		{"not supported", nodeWith(&v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(false)}), map[string]Result{"strict": notSupported}},
		{"no feature field", nodeWith(&v1.NodeFeatures{}), map[string]Result{"strict": notSupported}},
		{"no features", nodeWith(nil), map[string]Result{"strict": notSupported}},
		{"no node", func() *v1.Node { return nil }, map[string]Result{"strict": notSupported}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cases []admitCase
			for _, pc := range []struct {
				name string
				pod  *v1.Pod
			}{
				{"none", pod("a")},
				{"no policy", pod("a", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{} })},
				{"merge", pod("a", policy(v1.SupplementalGroupsPolicyMerge))},
				{"strict", pod("a", policy(v1.SupplementalGroupsPolicyStrict))},
			} {
				want, ok := tc.want[pc.name]
				if !ok {
					want = Admitted()
				}
				cases = append(cases, admitCase{name: pc.name, pod: pc.pod, want: want})
			}
			runCases(t, SupplementalGroupsPolicy(tc.node), cases)
		})
	}
}

func sysctlPod(hostNet, hostIPC bool, names ...string) *v1.Pod {
	return pod("a", func(p *v1.Pod) {
		p.Spec.HostNetwork, p.Spec.HostIPC = hostNet, hostIPC
		p.Spec.SecurityContext = &v1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
	})
}

func TestSysctls(t *testing.T) {
	h, err := newSysctls(append(SafeSysctls("5.10.0"), "kernel.msg*", "net.core.somaxconn"))
	if err != nil {
		t.Fatal(err)
	}
	forbidden := func(msg string) Result { return rejected("SysctlForbidden", "forbidden sysctl: "+msg) }
	runCases(t, h, []admitCase{
		{name: "none", pod: sysctlPod(false, false), want: Admitted()},
		{name: "safe", pod: sysctlPod(false, false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_rmem"), want: Admitted()},
		{name: "safe with slashes", pod: sysctlPod(false, false, "net/ipv4/ip_local_port_range"), want: Admitted()},
		{name: "unsafe", pod: sysctlPod(false, false, "kernel.sem"), want: forbidden(`"kernel.sem" not allowlisted`)},
		{name: "allowed by pattern", pod: sysctlPod(false, false, "kernel.msgmax"), want: Admitted()},
		{name: "allowed by name", pod: sysctlPod(false, false, "net.core.somaxconn"), want: Admitted()},
		{name: "net sysctl with host network", pod: sysctlPod(true, false, "net.ipv4.ip_local_port_range"),
			want: forbidden(`"net.ipv4.ip_local_port_range" not allowed with host Net enabled`)},
		{name: "ipc sysctl with host IPC", pod: sysctlPod(false, true, "kernel.shm_rmid_forced"),
			want: forbidden(`"kernel.shm_rmid_forced" not allowed with host IPC enabled`)},
		{name: "ipc pattern with host IPC", pod: sysctlPod(false, true, "kernel.msgmnb"),
			want: forbidden(`"kernel.msgmnb" not allowed with host IPC enabled`)},
		{name: "net sysctl with host IPC only", pod: sysctlPod(false, true, "net.ipv4.tcp_syncookies"), want: Admitted()},
	})

	for _, tt := range []struct {
		pattern, err string
	}{
		{"kernel.msg*", ""},
		{"net.*", ""},
		{"net/ipv4/*", ""},
		{"vm.swappiness", `admission: the sysctls "vm.swappiness" are not known to be namespaced`},
		{"kernel.*", `admission: the sysctls "kernel." are not known to be namespaced`},
		{"Kernel.msgmax", `admission: sysctl "Kernel.msgmax" must have at most 253 characters and match the regex`},
	} {
		_, err := Sysctls(SysctlOptions{AllowedUnsafe: []string{tt.pattern}, KernelVersion: "6.1"})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("Sysctls(%q) = %v, want %q", tt.pattern, err, tt.err)
		}
	}
}

func TestSafeSysctls(t *testing.T) {
	legacy := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
		"net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
	for _, tt := range []struct {
		kernel string
		extra  []string
	}{
		{"", nil},
		{"garbage", nil},
		{"3.10.0-1160.el7.x86_64", nil},
		{"4.4.0", []string{"net.ipv4.ip_local_reserved_ports"}},
		{"4.15.0-generic", []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}},
		{"6.18.44-fc-v1045", []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}},
	} {
		if diff := cmp.Diff(append(append([]string{}, legacy...), tt.extra...), SafeSysctls(tt.kernel)); diff != "" {
			t.Errorf("SafeSysctls(%q) (-want +got):\n%s", tt.kernel, diff)
		}
	}
}

func TestAppArmor(t *testing.T) {
	loaded := func(name string) (bool, error) { return name == "k8s-deny-write", nil }
	on := AppArmor(AppArmorOptions{Enabled: func() bool { return true }, Loaded: loaded})
	off := AppArmor(AppArmorOptions{Enabled: func() bool { return false }, Loaded: loaded})
	profile := func(typ v1.AppArmorProfileType, name *string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: typ, LocalhostProfile: name}}
		}
	}
	runCases(t, on, []admitCase{
		{name: "none", pod: pod("a"), want: Admitted()},
		{name: "runtime default", pod: pod("a", profile(v1.AppArmorProfileTypeRuntimeDefault, nil)), want: Admitted()},
		{name: "loaded localhost", pod: pod("a", profile(v1.AppArmorProfileTypeLocalhost, ptr.To("k8s-deny-write"))), want: Admitted()},
		{name: "not loaded", pod: pod("a", profile(v1.AppArmorProfileTypeLocalhost, ptr.To("missing"))),
			want: rejected("AppArmor", `Cannot enforce AppArmor: profile "missing" is not loaded`)},
		{name: "annotation not loaded", pod: pod("a", func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/app": "localhost/other"}
		}), want: rejected("AppArmor", `Cannot enforce AppArmor: profile "other" is not loaded`)},
		{name: "running pods are not checked again", pod: pod("a", profile(v1.AppArmorProfileTypeLocalhost, ptr.To("missing")),
			func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }), want: Admitted()},
	})
	runCases(t, off, []admitCase{
		{name: "unconfined on a host without AppArmor", pod: pod("a", profile(v1.AppArmorProfileTypeUnconfined, nil)), want: Admitted()},
		{name: "pod-level profile on a host without AppArmor", pod: pod("a", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		}), want: rejected("AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host")},
	})
	ok, err := profileListed(bufio.NewScanner(strings.NewReader("docker-default (enforce)\nk8s-deny-write (complain)\n")), "k8s-deny-write")
	if !ok || err != nil {
		t.Errorf("profileListed = %v, %v", ok, err)
	}
}

func TestRuntimeClass(t *testing.T) {
	classes := map[string]string{"gvisor": "runsc", "default": "runc"}
	h := RuntimeClass(RuntimeClassOptions{
		Lookup: func(name string) (string, error) {
			if h, ok := classes[name]; ok {
				return h, nil
			}
			if name == "unlisted" {
				return "", errors.New("RuntimeClasses not listed yet")
			}
			return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
		},
		Handlers: func() []string { return []string{"runc"} },
	})
	class := func(name string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.RuntimeClassName = &name } }
	runCases(t, h, []admitCase{
		{name: "no class", pod: pod("a"), want: Admitted()},
		{name: "known handler", pod: pod("a", class("default")), want: Admitted()},
		{name: "missing class", pod: pod("a", class("kata")), want: rejected("RuntimeClass", `runtimeclasses.node.k8s.io "kata" not found`)},
		{name: "look-up error admits (the sandbox retries)", pod: pod("a", class("unlisted")), want: Admitted()},
		{name: "empty class", pod: pod("a", class("")), want: Admitted()},
		{name: "handler the runtime lacks", pod: pod("a", class("gvisor")),
			want: rejected("RuntimeClass", `RuntimeClass "gvisor" names the runtime handler "runsc", which this node does not offer`)},
	})
}

// TestRuntimeClassHandlersUnknown: a runtime that lists no handlers
// (containerd 1.6, or a Status not read yet) has every class's handler
// accepted: the sandbox's creation reports a handler it lacks.
func TestRuntimeClassHandlersUnknown(t *testing.T) {
	h := RuntimeClass(RuntimeClassOptions{
		Lookup:   func(string) (string, error) { return "runsc", nil },
		Handlers: func() []string { return nil },
	})
	runCases(t, h, []admitCase{
		{name: "no handler list", pod: pod("a", func(p *v1.Pod) { p.Spec.RuntimeClassName = ptr.To("gvisor") }), want: Admitted()},
	})
}

func TestRuntimeClassWithoutLookup(t *testing.T) {
	runCases(t, RuntimeClass(RuntimeClassOptions{}), []admitCase{
		{name: "class ignored", pod: pod("a", func(p *v1.Pod) { p.Spec.RuntimeClassName = ptr.To("kata") }), want: Admitted()},
	})
}

func TestNoNewPrivs(t *testing.T) {
	noEscalation := func(p *v1.Pod) {
		p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
	}
	runCases(t, NoNewPrivs(func() error { return errors.New("the runtime cannot set no_new_privs") }), []admitCase{
		{name: "not required", pod: pod("a"), want: Admitted()},
		{name: "required", pod: pod("a", noEscalation), want: rejected("NoNewPrivs", "Cannot enforce NoNewPrivs: the runtime cannot set no_new_privs")},
	})
	runCases(t, NoNewPrivs(func() error { return nil }), []admitCase{{name: "supported", pod: pod("a", noEscalation), want: Admitted()}})
}

func TestChain(t *testing.T) {
	var calls []string
	h := func(name string, admit bool) Handler {
		return Func(func(*v1.Pod, []*v1.Pod) Result {
			calls = append(calls, name)
			if admit {
				return Admitted()
			}
			return rejected(name, "no")
		})
	}
	if r := Chain(h("a", true), h("b", false), h("c", false)).Admit(pod("x"), nil); r.Reason != "b" {
		t.Errorf("Chain = %+v, want the first rejection", r)
	}
	if diff := cmp.Diff([]string{"a", "b"}, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if r := Chain().Admit(pod("x"), nil); !r.Admit {
		t.Errorf("empty Chain = %+v", r)
	}
}

// TestResourceFitAndPortsFollowTheActivePods: a batch admitted by appending
// each admitted pod to the active pods, as the agent admits, is counted
// with every pod appended; active pods that do not start with the last
// call's are counted afresh.
func TestResourceFitAndPortsFollowTheActivePods(t *testing.T) {
	h := Chain(ResourceFit(node()), NodePorts())
	port := func(p int32) func(*v1.Pod) {
		return func(pod *v1.Pod) { pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: p}} }
	}
	var active []*v1.Pod
	admit := func(p *v1.Pod) Result {
		r := h.Admit(p, active)
		if r.Admit {
			active = append(active, p)
		}
		return r
	}
	for i := range 3 {
		if r := admit(pod(fmt.Sprint("p", i), requests(rl("cpu", "500m")), port(int32(8000+i)))); !r.Admit {
			t.Fatalf("pod %d rejected: %v", i, r)
		}
	}
	if diff := cmp.Diff(rejected("OutOfcpu", "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"),
		admit(pod("big", requests(rl("cpu", "1"))))); diff != "" {
		t.Errorf("after three pods (-want +got):\n%s", diff)
	}
	if r := admit(pod("clash", requests(rl("cpu", "100m")), port(8001))); r.Reason != ReasonNodePorts {
		t.Errorf("a pod on a used host port: %v, want %s", r, ReasonNodePorts)
	}
	// Overwrite an admitted pod in place: the caches must see it.
	active[0] = pod("p0-small", requests(rl("cpu", "10m")), port(9000))
	if r := admit(pod("fits-now", requests(rl("cpu", "990m")), port(8000))); !r.Admit {
		t.Errorf("after the first pod shrank: %v, want admitted", r)
	}
	// Fewer pods: counted afresh.
	active = active[1:2]
	if r := admit(pod("big-again", requests(rl("cpu", "1500m")), port(8002))); !r.Admit {
		t.Errorf("beside one pod of 500m: %v, want admitted", r)
	}
}

// BenchmarkAdmitBatch admits 10,000 pods with requests and host ports as
// the agent admits a batch: each admitted pod joins the active pods.
func BenchmarkAdmitBatch(b *testing.B) {
	n := node(func(n *v1.Node) { n.Status.Allocatable = rl("cpu", "100", "memory", "100Gi", "pods", "20000") })
	pods := make([]*v1.Pod, 10000)
	for i := range pods {
		pods[i] = pod(fmt.Sprint("p", i), requests(rl("cpu", "1m", "memory", "1Mi")), func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: int32(10000 + i)}}
		})
	}
	h := Chain(PodCount(20000), ResourceFit(n), NodePorts())
	b.ReportAllocs()
	for b.Loop() {
		active := make([]*v1.Pod, 0, len(pods))
		for _, p := range pods {
			if r := h.Admit(p, active); !r.Admit {
				b.Fatal(r)
			}
			active = append(active, p)
		}
	}
}
