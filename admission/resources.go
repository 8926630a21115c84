package admission

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodekit/nodekit/podmodel"
)

// PodCount is the kubelet's pod count check: at most limit active pods,
// else reason OutOfpods with "Node didn't have enough resource: pods,
// requested: 1, used: 110, capacity: 110".
func PodCount(limit int) Handler {
	return Func(func(_ *v1.Pod, active []*v1.Pod) Result {
		if len(active)+1 <= limit {
			return Admitted()
		}
		return insufficient(v1.ResourcePods, 1, int64(len(active)), int64(limit))
	})
}

func insufficient(name v1.ResourceName, requested, used, capacity int64) Result {
	reason := ReasonOutOfPrefix + string(name)
	return Result{
		Reason: reason,
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity),
	}
}

// ResourceFit is the kubelet's resource check (the scheduler's
// NodeResourcesFit as the kubelet runs it): the pod's requests, counted as
// the kubelet counts them (init containers, sidecars, pod-level resources
// and overhead: podmodel.Requests), must fit in the node's allocatable
// resources less the requests of the active pods. Checked in the
// kubelet's order: cpu (millicores), memory, ephemeral-storage (bytes),
// then hugepages and extended resources by name; the first that does not
// fit rejects the pod with reason OutOf<resource> and "Node didn't have
// enough resource: cpu, requested: 1500, used: 1000, capacity: 2000".
//
// As the kubelet, an extended resource (example.com/gpu) the node does
// not list is not checked (cluster-level resources), while a hugepage
// size it does not list has a capacity of zero. The pod count is
// PodCount's. A nil node admits every pod.
func ResourceFit(node NodeFunc) Handler {
	var cache requestsCache
	return Func(func(pod *v1.Pod, active []*v1.Pod) Result {
		n := node()
		if n == nil {
			return Admitted()
		}
		if !requestsAny(pod) {
			return Admitted()
		}
		alloc := n.Status.Allocatable
		want := podmodel.Requests(pod)
		names := make([]v1.ResourceName, 0, len(want))
		for name, q := range want {
			if q.IsZero() || !checked(name) {
				continue
			}
			if extended(name) {
				if _, ok := alloc[name]; !ok {
					continue
				}
			}
			names = append(names, name)
		}
		if len(names) == 0 {
			return Admitted()
		}
		slices.SortFunc(names, compareResources)
		used := cache.used(active, names)
		for _, name := range names {
			req := amount(name, want[name])
			c := alloc[name]
			capacity := amount(name, c)
			if req > capacity-used[name] {
				return insufficient(name, req, used[name], capacity)
			}
		}
		return Admitted()
	})
}

// requestsAny reports whether the pod requests anything: a BestEffort pod
// without overhead fits anywhere, without counting.
func requestsAny(pod *v1.Pod) bool {
	if len(pod.Spec.Overhead) > 0 || (pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0) {
		return true
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if len(cs[i].Resources.Requests) > 0 {
				return true
			}
		}
	}
	return false
}

// requestsCache keeps, between admissions, the sums of the requests of
// the active pods it was last given. A pod's spec never changes under the
// same *v1.Pod (an update brings a new object), and the agent admits a
// batch of pods by appending each admitted one to the active pods: when
// active starts with the pods of the last call, only the pods after them
// are added. Admitting a batch of n pods then costs n requests computed
// and O(n²) pointer comparisons (0.1 s at 10,000 pods) rather than O(n²)
// request computations. Any other active pods are summed again, from the
// requests kept of each pod.
type requestsCache struct {
	mu   sync.Mutex
	last []*v1.Pod
	sums map[v1.ResourceName]int64
	// pods holds the requests of each pod summed, so that summing afresh
	// computes only the requests of new pods; gen marks those of the last
	// time, the others are dropped.
	pods map[types.UID]*cachedRequests
	gen  uint64
}

type cachedRequests struct {
	pod      *v1.Pod
	requests v1.ResourceList
	gen      uint64
}

// used returns the sums of the named resources' requests of the active
// pods.
func (c *requestsCache) used(active []*v1.Pod, names []v1.ResourceName) map[v1.ResourceName]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods == nil {
		c.pods = make(map[types.UID]*cachedRequests)
	}
	from := 0
	if extends(active, c.last) {
		from = len(c.last)
	} else {
		clear(c.last)
		c.last = c.last[:0]
		c.sums = make(map[v1.ResourceName]int64)
		c.gen++
	}
	for _, p := range active[from:] {
		cr := c.pods[p.UID]
		if cr == nil || cr.pod != p {
			cr = &cachedRequests{pod: p, requests: podmodel.Requests(p)}
			c.pods[p.UID] = cr
		}
		cr.gen = c.gen
		for name, q := range cr.requests {
			c.sums[name] += amount(name, q)
		}
	}
	if from == 0 {
		for uid, cr := range c.pods {
			if cr.gen != c.gen {
				delete(c.pods, uid)
			}
		}
	}
	c.last = append(c.last, active[from:]...)
	used := make(map[v1.ResourceName]int64, len(names))
	for _, name := range names {
		used[name] = c.sums[name]
	}
	return used
}

// extends reports whether active starts with the pods of last (the same
// objects, in order).
func extends(active, last []*v1.Pod) bool {
	if len(last) == 0 || len(active) < len(last) {
		return false
	}
	for i, p := range last {
		if active[i] != p {
			return false
		}
	}
	return true
}

// compareResources orders cpu, memory and ephemeral-storage first, as the
// kubelet checks them, then the other resources by name.
func compareResources(a, b v1.ResourceName) int {
	if d := cmpOrder(a) - cmpOrder(b); d != 0 {
		return d
	}
	return strings.Compare(string(a), string(b))
}

func cmpOrder(n v1.ResourceName) int {
	switch n {
	case v1.ResourceCPU:
		return 0
	case v1.ResourceMemory:
		return 1
	case v1.ResourceEphemeralStorage:
		return 2
	}
	return 3
}

// amount is a quantity in the kubelet's unit: millicores for cpu, the
// value for every other resource.
func amount(n v1.ResourceName, q resource.Quantity) int64 {
	if n == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// checked reports whether the kubelet's fit check counts the resource:
// cpu, memory, ephemeral-storage and the scalar resources (hugepages,
// attachable volumes, prefixed native and extended resources).
func checked(n v1.ResourceName) bool {
	switch n {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return true
	}
	s := string(n)
	return strings.HasPrefix(s, v1.ResourceHugePagesPrefix) || strings.HasPrefix(s, "attachable-volumes-") || strings.Contains(s, "/")
}

// extended reports whether n is an extended resource: a qualified name
// outside the kubernetes.io domain, not a quota name ("requests.").
func extended(n v1.ResourceName) bool {
	s := string(n)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) {
		return false
	}
	if strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}

// maxMilliCPU is the largest cpu quantity a cgroup can be given: its CFS
// quota (millicores × the 100000µs period / 1000) must fit an int64.
const maxMilliCPU = math.MaxInt64 / 100000

var (
	maxCPU           = resource.NewMilliQuantity(maxMilliCPU, resource.DecimalSI)
	maxInt64Quantity = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
)

// InvalidResources rejects, with reason InvalidResources, a pod whose
// resources no node can honour, checked in order (init containers,
// containers, pod-level resources, overhead) and reporting the first of:
// a request or limit that is negative; one too large for the cgroup
// arithmetic (cpu above 2^63/100000 millicores, any other resource at
// 2^63-1, where parsing clamps); a limit below the request of the same
// resource. The message names the container and the resource:
// `container "app": cpu request -100m is negative`.
//
// The API server rejects such pods before they reach a kubelet; static
// pods and pods from other sources skip it, so nodekit checks them here
// rather than half-create their cgroups.
func InvalidResources() Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				c := &cs[i]
				if msg := invalidResources(c.Resources.Requests, c.Resources.Limits); msg != "" {
					return Result{Reason: ReasonInvalidResources, Message: "container " + strconv.Quote(c.Name) + ": " + msg}
				}
			}
		}
		if r := pod.Spec.Resources; r != nil {
			if msg := invalidResources(r.Requests, r.Limits); msg != "" {
				return Result{Reason: ReasonInvalidResources, Message: "pod-level resources: " + msg}
			}
		}
		if msg := invalidResources(pod.Spec.Overhead, nil); msg != "" {
			return Result{Reason: ReasonInvalidResources, Message: "overhead: " + msg}
		}
		return Admitted()
	})
}

func invalidResources(requests, limits v1.ResourceList) string {
	names := make([]v1.ResourceName, 0, len(requests)+len(limits))
	for n := range requests {
		names = append(names, n)
	}
	for n := range limits {
		names = append(names, n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
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
				return string(n) + " " + kv.kind + " " + q.String() + " is negative"
			}
			if tooLarge(n, q) {
				return string(n) + " " + kv.kind + " " + q.String() + " is too large"
			}
		}
		req, hasReq := requests[n]
		lim, hasLim := limits[n]
		if hasReq && hasLim && lim.Cmp(req) < 0 {
			return string(n) + " limit " + lim.String() + " is below its request " + req.String()
		}
	}
	return ""
}

func tooLarge(n v1.ResourceName, q resource.Quantity) bool {
	if n == v1.ResourceCPU {
		return q.Cmp(*maxCPU) > 0
	}
	return q.Cmp(*maxInt64Quantity) >= 0
}
