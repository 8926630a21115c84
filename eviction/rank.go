package eviction

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/nodekit/nodekit/podmodel"
)

// The kubelet's eviction reason and message formats.
const (
	Reason                  = "Evicted"
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
)

// usage is a pod's usage of the resource a signal reclaims, or nil when
// unknown.
func usage(s Signal, ps PodStats) *uint64 {
	switch resourceOf(s) {
	case v1.ResourceMemory:
		return ps.MemoryWorkingSet
	case v1.ResourceEphemeralStorage:
		return ps.EphemeralStorage
	case "inodes":
		return ps.Inodes
	default:
		return ps.Processes
	}
}

// request is the pod's request of the resource a signal reclaims (none
// for inodes and processes).
func request(s Signal, pod *v1.Pod) int64 {
	r := resourceOf(s)
	if r != v1.ResourceMemory && r != v1.ResourceEphemeralStorage {
		return 0
	}
	q := podmodel.Requests(pod)[r]
	return q.Value()
}

// Rank orders pods for eviction under the signal's pressure, the kubelet's
// way:
//
//   - memory: pods whose working set exceeds their memory request first,
//     then lower priority first, then the larger usage above the request;
//   - disk (nodefs, imagefs): the same with ephemeral storage (inodes:
//     with no request, by inodes used);
//   - pid: lower priority first, then more processes.
//
// Pods without stats come first where usage is compared, as with the
// kubelet. Ties keep the input order. Rank sorts pods in place.
func Rank(s Signal, pods []*v1.Pod, stats map[types.UID]PodStats) {
	// The keys are computed once per pod: a pod's requests take a walk
	// over its containers.
	type key struct {
		pod      *v1.Pod
		measured bool
		exceeds  bool
		above    int64 // usage less request
		priority int32
	}
	keys := make([]key, len(pods))
	for i, p := range pods {
		k := key{pod: p, priority: corev1helpers.PodPriority(p)}
		if ps, ok := stats[p.UID]; ok {
			if u := usage(s, ps); u != nil {
				k.measured = true
				k.above = int64(*u) - request(s, p)
				k.exceeds = k.above > 0
			}
		}
		keys[i] = k
	}
	exceeds := func(a, b key) int {
		if !a.measured || !b.measured {
			return cmpBool(!a.measured, !b.measured)
		}
		return cmpBool(a.exceeds, b.exceeds)
	}
	above := func(a, b key) int {
		if !a.measured || !b.measured {
			return cmpBool(!a.measured, !b.measured)
		}
		return cmp.Compare(b.above, a.above) // larger first
	}
	priority := func(a, b key) int { return cmp.Compare(a.priority, b.priority) }
	order := []func(a, b key) int{exceeds, priority, above}
	if s == SignalPIDAvailable {
		order = []func(a, b key) int{priority, above}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		for _, f := range order {
			if c := f(a, b); c != 0 {
				return c
			}
		}
		return 0
	})
	for i := range keys {
		pods[i] = keys[i].pod
	}
}

// cmpBool orders true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

// Message is the kubelet's eviction message for a pod evicted to reclaim
// the resource of threshold t: the resource, the threshold's amount and
// the observed value, and each container using more than it requests.
func Message(t Threshold, pod *v1.Pod, ps *PodStats, thresholds []Threshold, obs Observations) string {
	r := resourceOf(t.Signal)
	var b strings.Builder
	fmt.Fprintf(&b, nodeLowMessageFmt, r)
	if amount, avail := thresholdInfo(r, thresholds, obs); amount != nil {
		fmt.Fprintf(&b, thresholdMetMessageFmt, amount, avail)
	}
	if ps == nil {
		return b.String()
	}
	for _, c := range pod.Spec.Containers {
		cs, ok := ps.Containers[c.Name]
		if !ok {
			continue
		}
		var u *uint64
		switch r {
		case v1.ResourceMemory:
			u = cs.MemoryWorkingSet
		case v1.ResourceEphemeralStorage:
			u = cs.EphemeralStorage
		}
		if u == nil {
			continue
		}
		used := resource.NewQuantity(int64(*u), resource.BinarySI)
		req := c.Resources.Requests[r]
		if used.Cmp(req) > 0 {
			fmt.Fprintf(&b, containerMessageFmt, c.Name, used.String(), req.String(), r)
		}
	}
	return b.String()
}

// IsCritical reports whether the kubelet would never evict the pod: a
// static or mirror pod, or one of system-critical priority (2000000000
// and above).
func IsCritical(pod *v1.Pod) bool {
	if podmodel.IsStatic(pod) || podmodel.IsMirror(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= 2000000000
}

// PressureTaints are the taints the node lifecycle controller puts on a
// node with the given conditions (NoSchedule), in the order given.
func PressureTaints(conditions []v1.NodeConditionType) []v1.Taint {
	var out []v1.Taint
	for _, c := range conditions {
		key := ""
		switch c {
		case v1.NodeMemoryPressure:
			key = v1.TaintNodeMemoryPressure
		case v1.NodeDiskPressure:
			key = v1.TaintNodeDiskPressure
		case v1.NodePIDPressure:
			key = v1.TaintNodePIDPressure
		default:
			continue
		}
		out = append(out, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
	}
	return out
}

// Admit is the kubelet's eviction admission: with no pressure every pod is
// admitted; critical pods always are; under memory pressure only, a pod
// that is not BestEffort, or tolerates the memory-pressure taint, is;
// otherwise the pod is rejected with reason Evicted and "The node had
// condition: [...]".
func Admit(pod *v1.Pod, conditions []v1.NodeConditionType) (ok bool, reason, message string) {
	if len(conditions) == 0 || IsCritical(pod) {
		return true, "", ""
	}
	if slices.Contains(conditions, v1.NodeMemoryPressure) {
		if podmodel.QOSClass(pod) != v1.PodQOSBestEffort {
			return true, "", ""
		}
		if corev1helpers.TolerationsTolerateTaint(logr.Discard(), pod.Spec.Tolerations, &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}, false) {
			return true, "", ""
		}
	}
	return false, Reason, fmt.Sprintf(nodeConditionMessageFmt, conditions)
}
