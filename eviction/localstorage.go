package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podmodel"
)

// The kubelet's messages of local storage eviction.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q."
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// LocalStorageViolation is the kubelet's local storage check of one pod
// (localStorageEviction), in its order: an emptyDir volume using more than
// its sizeLimit; the pod's ephemeral storage above its ephemeral-storage
// limit (podmodel.Limits: the containers' limits, init containers and
// pod-level limits counted as the kubelet counts them); a container whose
// ephemeral storage is above its own limit. It returns the kubelet's
// eviction message, and false when the pod is within its limits or its
// usage is unknown.
func LocalStorageViolation(pod *v1.Pod, ps PodStats) (string, bool) {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.EmptyDir == nil || vol.EmptyDir.SizeLimit == nil || vol.EmptyDir.SizeLimit.Sign() != 1 {
			continue
		}
		used, ok := ps.Volumes[vol.Name]
		if !ok {
			continue
		}
		if quantity(used).Cmp(*vol.EmptyDir.SizeLimit) > 0 {
			return fmt.Sprintf(emptyDirMessageFmt, vol.Name, vol.EmptyDir.SizeLimit.String()), true
		}
	}
	if !limitsStorage(pod) {
		return "", false
	}
	if limit, ok := podmodel.Limits(pod)[v1.ResourceEphemeralStorage]; ok {
		var used uint64
		if ps.EphemeralStorage != nil {
			used = *ps.EphemeralStorage
		}
		if quantity(used).Cmp(limit) > 0 {
			return fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), true
		}
	}
	for _, c := range pod.Spec.Containers {
		limit := c.Resources.Limits.StorageEphemeral()
		if limit == nil || limit.Value() == 0 {
			continue
		}
		cs, ok := ps.Containers[c.Name]
		if !ok || cs.EphemeralStorage == nil {
			continue
		}
		if limit.Cmp(*quantity(*cs.EphemeralStorage)) < 0 {
			return fmt.Sprintf(containerEphemeralStorageMessageFmt, c.Name, limit.String()), true
		}
	}
	return "", false
}

// limitsStorage reports whether any of the pod's containers, or the pod,
// limits ephemeral storage (saving podmodel.Limits for the pods that do
// not).
func limitsStorage(pod *v1.Pod) bool {
	if r := pod.Spec.Resources; r != nil {
		if _, ok := r.Limits[v1.ResourceEphemeralStorage]; ok {
			return true
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Limits[v1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

func quantity(bytes uint64) *resource.Quantity {
	return resource.NewQuantity(int64(min(bytes, 1<<63-1)), resource.BinarySI)
}

// localStorageEviction evicts every active pod over one of its local
// storage limits, as the kubelet does before it looks at the thresholds:
// at once (grace period 0), status Failed/Evicted with the message and no
// DisruptionTarget condition, a Warning Evicted event. Critical pods are
// never evicted.
func (m *Manager) localStorageEviction(pods []*v1.Pod, stats *Stats) []*v1.Pod {
	var evicted []*v1.Pod
	for _, pod := range pods {
		ps, ok := stats.Pods[pod.UID]
		if !ok {
			continue
		}
		msg, over := LocalStorageViolation(pod, ps)
		if !over {
			continue
		}
		if IsCritical(pod) {
			m.log.Error(nil, "Eviction manager: cannot evict a critical pod", "pod", pod.Namespace+"/"+pod.Name, "message", msg)
			continue
		}
		if m.opts.Recorder != nil {
			m.opts.Recorder.Event(pod, v1.EventTypeWarning, Reason, msg)
		}
		m.log.Info("Eviction manager: evicting pod over its local storage limit", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "message", msg)
		m.opts.Evict(pod, 0, statusFunc(msg, false))
		evicted = append(evicted, pod)
	}
	return evicted
}
