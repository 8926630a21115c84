package admission

import (
	v1 "k8s.io/api/core/v1"
)

// Result is the outcome of an admission check.
type Result struct {
	// Admit is true when the pod may run.
	Admit bool
	// Reason is a short CamelCase reason (it becomes the rejected pod's
	// status reason, such as OutOfcpu or SysctlForbidden), Message a
	// sentence for people (the status message after "Pod was rejected: ").
	Reason, Message string
}

// Admitted() is the Result of a check that lets the pod run.
func Admitted() Result { return Result{Admit: true} }

// Handler decides whether a new pod may run, given the pods already
// admitted and still active (the pod itself is not among them). It is
// called from one goroutine (the sync loop's), must not block on I/O that
// can take long, and must not modify its arguments.
type Handler interface {
	Admit(pod *v1.Pod, active []*v1.Pod) Result
}

// Func adapts a function to a Handler.
type Func func(pod *v1.Pod, active []*v1.Pod) Result

// Admit calls f.
func (f Func) Admit(pod *v1.Pod, active []*v1.Pod) Result { return f(pod, active) }

var _ Handler = Func(nil)

// Chain runs the handlers in order; the first rejection wins, as in the
// kubelet's list of admit handlers.
func Chain(handlers ...Handler) Handler {
	return Func(func(pod *v1.Pod, active []*v1.Pod) Result {
		for _, h := range handlers {
			if r := h.Admit(pod, active); !r.Admit {
				return r
			}
		}
		return Admitted()
	})
}

// NodeFunc returns the Node the agent runs as, or nil when it is not
// known: the Node object of an agent joined to a cluster, or one a
// standalone agent builds from its own labels, taints and capacity. The
// checks that need a Node (resources, node name, affinity, taints, the OS
// label) admit every pod while it returns nil. It is called at each
// admission and must be cheap; the Node must not be modified.
type NodeFunc func() *v1.Node

// The reasons of the kubelet's rejections (kubelet v1.37,
// pkg/kubelet/lifecycle and the scheduler plugins it runs), and those
// nodekit adds.
const (
	// ReasonOutOfPods: the node runs its maximum number of pods. Other
	// resources give "OutOf" + the resource name: OutOfcpu, OutOfmemory,
	// OutOfephemeral-storage, OutOfexample.com/gpu.
	ReasonOutOfPods = "OutOfpods"
	// ReasonOutOfPrefix prefixes the resource name of an insufficient
	// resource.
	ReasonOutOfPrefix = "OutOf"
	// ReasonNodeAffinity: the node's labels do not match the pod's node
	// selector or required node affinity.
	ReasonNodeAffinity = "NodeAffinity"
	// ReasonNodeName: spec.nodeName names another node.
	ReasonNodeName = "NodeName"
	// ReasonNodePorts: a host port of the pod is taken.
	ReasonNodePorts = "NodePorts"
	// ReasonTaintToleration: the pod does not tolerate a NoExecute taint
	// of the node.
	ReasonTaintToleration = "TaintToleration"
	// ReasonPodOSNotSupported: spec.os.name is not the node's OS.
	ReasonPodOSNotSupported = "PodOSNotSupported"
	// ReasonPodOSSelectorNodeLabelDoesNotMatch: the pod's kubernetes.io/os
	// label is not the node's.
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	// ReasonSupplementalGroupsPolicyNotSupported: the pod's
	// supplementalGroupsPolicy is Strict and the node does not support it.
	ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"
	// ReasonSysctlForbidden: a sysctl is neither safe nor allowed.
	ReasonSysctlForbidden = "SysctlForbidden"
	// ReasonAppArmor: an AppArmor profile cannot be enforced.
	ReasonAppArmor = "AppArmor"
	// ReasonNoNewPrivs: the runtime cannot enforce no_new_privs.
	ReasonNoNewPrivs = "NoNewPrivs"
	// ReasonRuntimeClass: the pod's RuntimeClass is unknown, or names a
	// handler the runtime lacks (nodekit's; see the package doc).
	ReasonRuntimeClass = "RuntimeClass"
	// ReasonInvalidResources: a request or limit that no node can honour
	// (nodekit's; see the package doc).
	ReasonInvalidResources = "InvalidResources"
)

// predicateFailure is the kubelet's message for a failed scheduler
// predicate: "Predicate NodeAffinity failed: node(s) didn't match Pod's
// node affinity/selector".
func predicateFailure(name, desc string) Result {
	return Result{Reason: name, Message: "Predicate " + name + " failed: " + desc}
}
