package runtime

import (
	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records Kubernetes events about an object. It is the one
// method of k8s.io/client-go/tools/record.EventRecorder the agent and its
// pod runtime call, so any record.EventRecorder fits (the one an
// EventBroadcaster's NewRecorder returns, or record.NewFakeRecorder in
// tests) without this package depending on client-go. Implementations must be safe for
// concurrent use and should not block.
type EventRecorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// PodReference returns the reference events about the pod are recorded on:
// the pod itself (Kind Pod, APIVersion v1) with fieldPath naming a part of
// it, "" for the whole pod.
func PodReference(pod *v1.Pod, fieldPath string) *v1.ObjectReference {
	return &v1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       fieldPath,
	}
}
