package admission

import (
	"fmt"
	goruntime "runtime"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodekit/nodekit/podmodel"
)

// The scheduler predicates' descriptions, which the kubelet's messages
// quote.
const (
	descNodeAffinity    = "node(s) didn't match Pod's node affinity/selector"
	descNodeName        = "node(s) didn't match the requested node name"
	descNodePorts       = "node(s) didn't have free ports for the requested pod ports"
	descTaintToleration = "node(s) had taints that the pod didn't tolerate"
)

// NodeAffinity rejects, with reason NodeAffinity and "Predicate
// NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
// a pod whose node selector or required node affinity
// (requiredDuringSchedulingIgnoredDuringExecution) the node's labels and
// fields (metadata.name) do not match. A nil node admits every pod.
func NodeAffinity(node NodeFunc) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		n := node()
		if n == nil {
			return Admitted()
		}
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n); ok {
			return Admitted()
		}
		return predicateFailure(ReasonNodeAffinity, descNodeAffinity)
	})
}

// NodeName rejects, with reason NodeName and "Predicate NodeName failed:
// node(s) didn't match the requested node name", a pod whose spec.nodeName
// names another node. A nil node admits every pod.
func NodeName(node NodeFunc) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		n := node()
		if n == nil || pod.Spec.NodeName == "" || pod.Spec.NodeName == n.Name {
			return Admitted()
		}
		return predicateFailure(ReasonNodeName, descNodeName)
	})
}

// NodePorts rejects, with reason NodePorts and "Predicate NodePorts
// failed: node(s) didn't have free ports for the requested pod ports", a
// pod that asks for a host port an active pod holds: same protocol (TCP
// when empty) and port, and the same host IP or either on all addresses
// (0.0.0.0 when empty). The ports are those of the containers and of the
// sidecars (init containers that restart always), as the kubelet counts
// them.
func NodePorts() Handler {
	var cache portsCache
	return Func(func(pod *v1.Pod, active []*v1.Pod) Result {
		want := hostPorts(pod, nil)
		if len(want) == 0 {
			return Admitted()
		}
		if cache.conflict(active, want) {
			return predicateFailure(ReasonNodePorts, descNodePorts)
		}
		return Admitted()
	})
}

// portsCache keeps the host ports of the active pods it was last given,
// by protocol and port, and adds those of the pods after them when the
// next active pods start with the same pods, as requestsCache does.
type portsCache struct {
	mu    sync.Mutex
	last  []*v1.Pod
	ports map[hostPort][]string // IPs, by port with no IP
	buf   []hostPort
}

// conflict reports whether one of the ports wanted conflicts with a host
// port of the active pods.
func (c *portsCache) conflict(active []*v1.Pod, want []hostPort) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	from := 0
	if extends(active, c.last) {
		from = len(c.last)
	} else {
		clear(c.last)
		c.last = c.last[:0]
		c.ports = make(map[hostPort][]string)
	}
	for _, p := range active[from:] {
		c.buf = hostPorts(p, c.buf[:0])
		for _, hp := range c.buf {
			k := hostPort{protocol: hp.protocol, port: hp.port}
			c.ports[k] = append(c.ports[k], hp.ip)
		}
	}
	c.last = append(c.last, active[from:]...)
	for _, w := range want {
		for _, ip := range c.ports[hostPort{protocol: w.protocol, port: w.port}] {
			if w.conflicts(hostPort{ip: ip, protocol: w.protocol, port: w.port}) {
				return true
			}
		}
	}
	return false
}

type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

const allAddresses = "0.0.0.0"

func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.protocol == b.protocol &&
		(a.ip == b.ip || a.ip == allAddresses || b.ip == allAddresses)
}

func hostPorts(pod *v1.Pod, to []hostPort) []hostPort {
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = allAddresses
			}
			if hp.protocol == "" {
				hp.protocol = v1.ProtocolTCP
			}
			to = append(to, hp)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if podmodel.IsRestartableInit(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i])
		}
	}
	return to
}

// Taints rejects, with reason TaintToleration and "Predicate
// TaintToleration failed: node(s) had taints that the pod didn't
// tolerate", a pod that does not tolerate a NoExecute taint of the node.
// As the kubelet, NoSchedule and PreferNoSchedule taints are the
// scheduler's business (a pod bound to the node was placed despite them,
// or on purpose), and static pods are not checked. A nil node admits every
// pod.
func Taints(node NodeFunc) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		n := node()
		if n == nil || podmodel.IsStatic(pod) {
			return Admitted()
		}
		for i := range n.Spec.Taints {
			t := &n.Spec.Taints[i]
			if t.Effect != v1.TaintEffectNoExecute {
				continue
			}
			if !tolerated(pod.Spec.Tolerations, t) {
				return predicateFailure(ReasonTaintToleration, descTaintToleration)
			}
		}
		return Admitted()
	})
}

func tolerated(tolerations []v1.Toleration, t *v1.Taint) bool {
	for i := range tolerations {
		// Comparison operators (Lt, Gt) are an alpha feature the kubelet
		// leaves off by default.
		if tolerations[i].ToleratesTaint(logr.Discard(), t, false) {
			return true
		}
	}
	return false
}

// OS is the kubelet's OS check, on the agent's own OS (GOOS): a pod
// labelled kubernetes.io/os with another OS is rejected with reason
// PodOSSelectorNodeLabelDoesNotMatch and "Failed to admit pod as the
// `kubernetes.io/os` label doesn't match node label"; a pod whose
// spec.os.name is another OS with reason PodOSNotSupported and "Failed to
// admit pod as the OS field doesn't match node OS". As the kubelet, the
// node's own kubernetes.io/os label counts as GOOS whatever it says.
func OS() Handler { return osCheck(goruntime.GOOS) }

func osCheck(goos string) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		if l, ok := pod.Labels[v1.LabelOSStable]; ok && l != goos {
			return Result{
				Reason:  ReasonPodOSSelectorNodeLabelDoesNotMatch,
				Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
			}
		}
		if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != goos {
			return Result{
				Reason:  ReasonPodOSNotSupported,
				Message: "Failed to admit pod as the OS field doesn't match node OS",
			}
		}
		return Admitted()
	})
}

// SupplementalGroupsPolicy is the kubelet's check of a pod whose
// securityContext.supplementalGroupsPolicy is Strict: the node must
// support it (its status.features.supplementalGroupsPolicy, which the
// kubelet takes from the runtime's features), else the pod is rejected
// with reason SupplementalGroupsPolicyNotSupported and
// "SupplementalGroupsPolicy=Strict is not supported in this node", rather
// than run with the Merge policy. A pod with Merge, or without a policy,
// is admitted. The kubelet runs it after the OS checks.
func SupplementalGroupsPolicy(node NodeFunc) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		sc := pod.Spec.SecurityContext
		if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
			return Admitted()
		}
		if n := node(); n != nil && n.Status.Features != nil && n.Status.Features.SupplementalGroupsPolicy != nil && *n.Status.Features.SupplementalGroupsPolicy {
			return Admitted()
		}
		return Result{
			Reason:  ReasonSupplementalGroupsPolicyNotSupported,
			Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict),
		}
	})
}
