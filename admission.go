package nodekit

import (
	goruntime "runtime"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/node"
)

// admitHandlers are the agent's admission checks, in the kubelet's order
// (resources the API server would have refused, sysctls, OS, pod count,
// resources, node affinity, node name, host ports, NoExecute taints,
// AppArmor), the RuntimeClass check (runtimeclass.go), then
// Options.Admit; the first rejection wins and records a Warning event on
// the pod with its reason and message, as the kubelet's rejectPod.
func (a *Agent) admitHandlers() ([]admission.Handler, error) {
	sysctls, err := admission.Sysctls(admission.SysctlOptions{AllowedUnsafe: a.opts.AllowedUnsafeSysctls})
	if err != nil {
		return nil, err
	}
	hs := []admission.Handler{
		admission.InvalidResources(),
		sysctls,
		admission.OS(),
		admission.PodCount(a.opts.MaxPods),
		admission.ResourceFit(a.admissionNode),
		admission.NodeAffinity(a.admissionNode),
		admission.NodeName(a.admissionNode),
		admission.NodePorts(),
		admission.Taints(a.admissionNode),
		admission.AppArmor(admission.AppArmorOptions{}),
		a.runtimeClasses.admission(),
	}
	chain := admission.Chain(append(hs, a.opts.Admit...)...)
	return []admission.Handler{admission.Func(func(pod *v1.Pod, active []*v1.Pod) admission.Result {
		r := chain.Admit(pod, active)
		if !r.Admit {
			a.recorder.Event(pod, v1.EventTypeWarning, r.Reason, r.Message)
		}
		return r
	})}, nil
}

// admissionNode is the Node admission checks the pods against: the
// registered Node of an agent joined to a cluster, else (standalone, or
// not registered yet, as the kubelet's initial node) one made from the
// agent's own name, labels (kubernetes.io/hostname, os and arch, plus
// Options.Node.Labels), taints (Options.Node.Taints), capacity and
// allocatable resources (Agent.Allocatable).
func (a *Agent) admissionNode() *v1.Node {
	if a.node != nil {
		if n, ok := a.node.Node(); ok {
			return n
		}
	}
	a.localNode.once.Do(func() {
		labels := map[string]string{
			node.LabelHostname: a.opts.NodeName,
			node.LabelOS:       goruntime.GOOS,
			node.LabelArch:     goruntime.GOARCH,
		}
		for k, v := range a.opts.Node.Labels {
			labels[k] = v
		}
		pods := *resource.NewQuantity(int64(a.opts.MaxPods), resource.DecimalSI)
		capacity := v1.ResourceList{v1.ResourcePods: pods}
		for k, v := range a.capacity {
			capacity[k] = v
		}
		// Allocatable as a registered Node reports it: capacity less the
		// reserved resources and the hard eviction thresholds.
		alloc := v1.ResourceList{v1.ResourcePods: pods}
		for k, v := range a.Allocatable() {
			alloc[k] = v
		}
		a.localNode.node = &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName, Labels: labels},
			Spec:       v1.NodeSpec{Taints: a.opts.Node.Taints},
			Status:     v1.NodeStatus{Capacity: capacity, Allocatable: alloc},
		}
	})
	return a.localNode.node
}

// localNode is built once, at the first admission (after Run read the
// capacity).
type localNode struct {
	once sync.Once
	node *v1.Node
}
