package cgroup

import (
	"math"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podmodel"
)

// ResourceError is a pod's resource that cannot be admitted. It matches
// ErrInvalidResources.
type ResourceError struct {
	// Pod is "namespace/name".
	Pod string
	// Container names the container, or "" for the pod-level resources,
	// the overhead or the pod's total (see Reason).
	Container string
	Resource  v1.ResourceName
	// Reason, such as `request -1 is negative`.
	Reason string
	// OutOfCapacity is true when the requests exceed the node's capacity
	// (the kubelet rejects such pods with reason "OutOf<resource>"), false
	// when the spec itself is wrong.
	OutOfCapacity bool
}

func (e *ResourceError) Error() string {
	s := "cgroup: pod " + e.Pod
	if e.Container != "" {
		s += " container " + strconv.Quote(e.Container)
	}
	return s + ": " + string(e.Resource) + " " + e.Reason
}

// Is makes ResourceError match ErrInvalidResources.
func (e *ResourceError) Is(target error) bool { return target == ErrInvalidResources }

// maxMilliCPU is the largest cpu quantity the cgroup arithmetic holds: its
// CFS quota (millicores × period / 1000) must fit an int64.
const maxMilliCPU = math.MaxInt64 / QuotaPeriod

var maxInt64Quantity = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)

// ValidatePodResources checks a pod's resources before admission, so that
// a pod that cannot be given its cgroup is rejected with a clear reason
// instead of half-created. In order (init containers, containers,
// pod-level resources, overhead, then the pod's total), it returns the
// first of:
//
//   - a request or limit that is negative;
//   - one too large for the cgroup arithmetic (cpu above 2^63/100000
//     millicores, any other resource at 2^63-1, where parsing clamps);
//   - a limit below the request of the same resource;
//   - a container request beyond capacity (for the resources capacity
//     lists);
//   - the pod's total requests (PodRequests: sidecars and init containers
//     counted as the kubelet does, pod-level resources, overhead) beyond
//     capacity.
//
// Limits beyond capacity are allowed (the node overcommits them, as the
// kubelet allows). A nil capacity skips the two last checks. The error is
// a *ResourceError matching ErrInvalidResources.
func ValidatePodResources(pod *v1.Pod, capacity v1.ResourceList) error {
	podName := pod.Namespace + "/" + pod.Name
	check := func(container string, requests, limits v1.ResourceList, againstCapacity bool) error {
		names := make([]v1.ResourceName, 0, len(requests)+len(limits))
		for n := range requests {
			names = append(names, n)
		}
		for n := range limits {
			names = append(names, n)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		bad := func(n v1.ResourceName, reason string) error {
			return &ResourceError{Pod: podName, Container: container, Resource: n, Reason: reason}
		}
		for _, n := range names {
			for _, kv := range []struct {
				kind string
				list v1.ResourceList
			}{{"request", requests}, {"limit", limits}} {
				q, ok := kv.list[n]
				if !ok {
					continue
				}
				if q.Sign() < 0 {
					return bad(n, kv.kind+" "+q.String()+" is negative")
				}
				if tooLarge(n, q) {
					return bad(n, kv.kind+" "+q.String()+" is too large")
				}
			}
			req, hasReq := requests[n]
			lim, hasLim := limits[n]
			if hasReq && hasLim && lim.Cmp(req) < 0 {
				return bad(n, "limit "+lim.String()+" is below its request "+req.String())
			}
			if c, ok := capacity[n]; ok && hasReq && againstCapacity && req.Cmp(c) > 0 {
				err := bad(n, "request "+req.String()+" exceeds the node's capacity "+c.String())
				err.(*ResourceError).OutOfCapacity = true
				return err
			}
		}
		return nil
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			if err := check(c.Name, c.Resources.Requests, c.Resources.Limits, true); err != nil {
				return err
			}
		}
	}
	if r := pod.Spec.Resources; r != nil {
		if err := check("", r.Requests, r.Limits, true); err != nil {
			err.(*ResourceError).Reason = "(pod-level) " + err.(*ResourceError).Reason
			return err
		}
	}
	if err := check("", pod.Spec.Overhead, nil, false); err != nil {
		err.(*ResourceError).Reason = "(overhead) " + err.(*ResourceError).Reason
		return err
	}
	if capacity == nil {
		return nil
	}
	total := podmodel.Requests(pod)
	names := make([]v1.ResourceName, 0, len(total))
	for n := range total {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if c, ok := capacity[n]; ok {
			if q := total[n]; q.Cmp(c) > 0 {
				return &ResourceError{Pod: podName, Resource: n, OutOfCapacity: true,
					Reason: "requests of the pod, " + q.String() + " in all, exceed the node's capacity " + c.String()}
			}
		}
	}
	return nil
}

func tooLarge(n v1.ResourceName, q resource.Quantity) bool {
	if n == v1.ResourceCPU {
		return q.Cmp(*resource.NewMilliQuantity(maxMilliCPU, resource.DecimalSI)) > 0
	}
	// Parsing clamps what does not fit to 2^63-1.
	return q.Cmp(*maxInt64Quantity) >= 0
}
