package podmodel

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Requests are the pod's resource requests as the kubelet and the
// scheduler count them (component-helpers' PodRequests): the sum of the
// app containers and sidecars, or the largest need of an init container
// (its own requests plus those of the sidecars started before it) when
// larger; pod-level requests (spec.resources) replace the sums of the
// resources they set; the overhead is added.
func Requests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// Limits are the pod's resource limits as the kubelet counts them
// (component-helpers' PodLimits): aggregated as Requests, pod-level limits
// replacing the sums of the resources they set, the overhead added to the
// limits that are set.
func Limits(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
}

// LimitsDeclared reports whether the pod's cpu and its memory are limited
// as a whole, as the kubelet's ResourceConfigForPod decides before it sets
// a Burstable pod's CFS quota and memory limit: every app container limits
// the resource, every sidecar or one started before it does, every init
// container or a sidecar started before it does; or the pod-level limits
// set it.
func LimitsDeclared(pod *v1.Pod) (cpu, memory bool) {
	cpu, memory = true, true
	check := func(res v1.ResourceList) {
		if res.Cpu().IsZero() {
			cpu = false
		}
		if res.Memory().IsZero() {
			memory = false
		}
	}
	for i := range pod.Spec.Containers {
		check(pod.Spec.Containers[i].Resources.Limits)
	}
	sidecars := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		combined := v1.ResourceList{}
		addList(combined, c.Resources.Limits)
		addList(combined, sidecars)
		if IsRestartableInit(c) {
			addList(sidecars, c.Resources.Limits)
		}
		check(combined)
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpu = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memory = true
		}
	}
	return cpu, memory
}

// HasPodLevelResources reports whether spec.resources sets a resource that
// pod-level resources support (cpu, memory, hugepages-*): the pod's cgroup
// is then sized from them.
func HasPodLevelResources(pod *v1.Pod) bool { return resourcehelper.IsPodLevelResourcesSet(pod) }

func addList(list, add v1.ResourceList) {
	for n, q := range add {
		if cur, ok := list[n]; ok {
			cur.Add(q)
			list[n] = cur
		} else {
			list[n] = q.DeepCopy()
		}
	}
}
