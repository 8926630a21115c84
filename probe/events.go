package probe

import (
	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records Kubernetes events about an object. It is the one
// method of k8s.io/client-go/tools/record.EventRecorder the Manager calls,
// so any record.EventRecorder fits (the one an EventBroadcaster's
// NewRecorder returns, or record.NewFakeRecorder in tests) without this
// package depending on client-go. Implementations must be safe for
// concurrent use and should not block.
type EventRecorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// EventUnhealthy is the reason of the Warning event recorded for each
// failed probe, the kubelet's: "Liveness probe failed: <output>" (or
// Readiness, Startup), or "Liveness probe errored and resulted in unknown
// state: <error>" for a probe that could not be run.
const EventUnhealthy = "Unhealthy"

// EventProbeWarning is the reason of the Warning event recorded for each
// probe that succeeded with a warning (a Warning result), the kubelet's:
// "Readiness probe warning: Probe terminated redirects, Response body:
// ..." (or Liveness, Startup).
const EventProbeWarning = "ProbeWarning"

// recordContainerEvent records an event on container c of the pod, with
// the container's field path as the kubelet's events: nothing when rec is
// nil.
func recordContainerEvent(rec EventRecorder, pod *v1.Pod, c *v1.Container, eventType, reason, message string) {
	if rec == nil {
		return
	}
	path := ""
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == c.Name {
			path = "spec.containers{" + c.Name + "}"
		}
	}
	if path == "" {
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == c.Name {
				path = "spec.initContainers{" + c.Name + "}"
			}
		}
	}
	if path == "" {
		return
	}
	rec.Event(&v1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       path,
	}, eventType, reason, message)
}

// eventName is the probe type as the kubelet's events name it.
func (t Type) eventName() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	}
	return "Startup"
}
