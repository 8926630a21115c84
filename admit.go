package nodekit

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cgroup"
)

// AdmitResult is the outcome of an admission check.
type AdmitResult struct {
	Admit bool
	// Reason is a short CamelCase reason (it becomes the pod's status
	// reason), Message a sentence for people.
	Reason, Message string
}

// AdmitHandler decides whether a new pod may run, given the pods already
// admitted and active.
type AdmitHandler interface {
	Admit(pod *v1.Pod, active []*v1.Pod) AdmitResult
}

// AdmitFunc adapts a function to an AdmitHandler.
type AdmitFunc func(pod *v1.Pod, active []*v1.Pod) AdmitResult

// Admit calls f.
func (f AdmitFunc) Admit(pod *v1.Pod, active []*v1.Pod) AdmitResult { return f(pod, active) }

var _ AdmitHandler = AdmitFunc(nil)

// MaxPods is the kubelet's pod count check: at most limit active pods,
// else reason OutOfpods.
func MaxPods(limit int) AdmitHandler {
	return AdmitFunc(func(_ *v1.Pod, active []*v1.Pod) AdmitResult {
		if len(active) < limit {
			return AdmitResult{Admit: true}
		}
		return AdmitResult{
			Reason:  "OutOfpods",
			Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(active), limit),
		}
	})
}

// ResourceFit rejects pods whose resources are invalid (negative, limits
// below requests: reason InvalidResources) or whose requests exceed what
// the node offers (reason OutOf<resource>), capacity being read at each
// admission.
func ResourceFit(capacity func() v1.ResourceList) AdmitHandler {
	return AdmitFunc(func(pod *v1.Pod, _ []*v1.Pod) AdmitResult {
		err := cgroup.ValidatePodResources(pod, capacity())
		if err == nil {
			return AdmitResult{Admit: true}
		}
		reason := "InvalidResources"
		var re *cgroup.ResourceError
		if errors.As(err, &re) && re.OutOfCapacity {
			reason = "OutOf" + string(re.Resource)
		}
		return AdmitResult{Reason: reason, Message: err.Error()}
	})
}
