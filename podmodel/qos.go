package podmodel

import (
	v1 "k8s.io/api/core/v1"
)

// QOSClass is the pod's quality-of-service class as the kubelet reads it
// (GetPodQOS): status.qosClass when the API server has set it, which never
// changes afterwards, otherwise ComputeQOSClass.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(pod)
}

// ComputeQOSClass computes the pod's quality-of-service class from its
// spec, as the kubelet's ComputePodQOS with pod-level resources enabled:
//
//   - when spec.resources sets cpu or memory (in requests or limits), the
//     pod-level requests and limits decide, and the containers' are not
//     looked at; an empty spec.resources, or one with other resources
//     only, does not count;
//   - otherwise the cpu and memory requests and limits of every container
//     (init and app; ephemeral containers have none) are summed;
//   - BestEffort when there is no positive cpu or memory request or limit;
//     Guaranteed when cpu and memory are both limited (by the pod, or by
//     every container) and each request equals its limit; Burstable
//     otherwise.
func ComputeQOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	if podLevelQOSSet(pod) {
		addQOS(requests, pod.Spec.Resources.Requests)
		if len(pod.Spec.Resources.Limits) > 0 && addQOS(limits, pod.Spec.Resources.Limits) < 2 {
			guaranteed = false
		}
	} else {
		each := func(cs []v1.Container) {
			for i := range cs {
				addQOS(requests, cs[i].Resources.Requests)
				if addQOS(limits, cs[i].Resources.Limits) < 2 {
					guaranteed = false
				}
			}
		}
		each(pod.Spec.Containers)
		each(pod.Spec.InitContainers)
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for n, req := range requests {
			if lim, ok := limits[n]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// qosResource reports whether n counts for the QoS class: cpu and memory.
func qosResource(n v1.ResourceName) bool { return n == v1.ResourceCPU || n == v1.ResourceMemory }

// addQOS adds the positive cpu and memory quantities of from to sum and
// returns how many it found.
func addQOS(sum, from v1.ResourceList) int {
	found := 0
	for n, q := range from {
		if !qosResource(n) || q.Sign() <= 0 {
			continue
		}
		found++
		d := q.DeepCopy()
		if cur, ok := sum[n]; ok {
			d.Add(cur)
		}
		sum[n] = d
	}
	return found
}

// podLevelQOSSet reports whether spec.resources sets cpu or memory, the
// resources the QoS class is computed from.
func podLevelQOSSet(pod *v1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, l := range []v1.ResourceList{r.Requests, r.Limits} {
		for n := range l {
			if qosResource(n) {
				return true
			}
		}
	}
	return false
}
