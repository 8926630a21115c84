package admission_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/admission"
)

// A chain of checks, as an agent runs them: the first rejection wins.
func ExampleChain() {
	sysctls, err := admission.Sysctls(admission.SysctlOptions{AllowedUnsafe: []string{"kernel.msg*"}, KernelVersion: "6.1"})
	if err != nil {
		panic(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"site": "lab"}}}
	nodeFunc := func() *v1.Node { return node }
	h := admission.Chain(sysctls, admission.PodCount(110), admission.NodeName(nodeFunc), admission.NodeAffinity(nodeFunc))

	pod := &v1.Pod{Spec: v1.PodSpec{
		NodeSelector:    map[string]string{"site": "lab"},
		SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.sem", Value: "250 32000 32 128"}}},
	}}
	r := h.Admit(pod, nil)
	fmt.Println(r.Admit, r.Reason, r.Message)

	pod.Spec.SecurityContext = nil
	pod.Spec.NodeSelector["site"] = "factory"
	r = h.Admit(pod, nil)
	fmt.Println(r.Admit, r.Reason, r.Message)
	// Output:
	// false SysctlForbidden forbidden sysctl: "kernel.sem" not allowlisted
	// false NodeAffinity Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector
}

// A check of one's own, beside the kubelet's.
func ExampleFunc() {
	edgeOnly := admission.Func(func(pod *v1.Pod, _ []*v1.Pod) admission.Result {
		if pod.Labels["edge"] == "yes" {
			return admission.Admitted()
		}
		return admission.Result{Reason: "NotForEdge", Message: "the pod is not labelled edge=yes"}
	})
	fmt.Println(edgeOnly.Admit(&v1.Pod{}, nil).Reason)
	// Output: NotForEdge
}
