package podruntime

import (
	"strings"

	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The reasons of the events the Manager records, the kubelet's
// (pkg/kubelet/events). The event type (Normal or Warning) is the
// kubelet's too.
const (
	// EventPulling (Normal): "Pulling image "x"".
	EventPulling = "Pulling"
	// EventPulled (Normal): "Successfully pulled image "x" in 1.2s", or
	// "Container image "x" already present on machine and can be accessed by the pod".
	EventPulled = "Pulled"
	// EventInspectFailed (Warning): the runtime could not report the
	// image's status.
	EventInspectFailed = "InspectFailed"
	// EventErrImageNeverPull (Warning): the image is absent and its pull
	// policy is Never.
	EventErrImageNeverPull = "ErrImageNeverPull"
	// EventFailed (Warning): an image pull failed ("Failed to pull image
	// "x": ..."), or a container could not start ("Error: ..." with the
	// waiting reason or the runtime's message).
	EventFailed = "Failed"
	// EventBackOff: an image pull waits out its back-off (Normal, "Back-off
	// pulling image "x"") or a container its restart back-off (Warning,
	// "Back-off restarting failed container c in pod name_ns(uid)").
	EventBackOff = "BackOff"
	// EventCreated (Normal): "Created container: c".
	EventCreated = "Created"
	// EventStarted (Normal): "Started container c".
	EventStarted = "Started"
	// EventKilling (Normal): "Stopping container c", or why SyncPod stops
	// it ("Container c failed liveness probe, will be restarted").
	EventKilling = "Killing"
	// EventSandboxChanged (Normal): the pod's sandbox is replaced.
	EventSandboxChanged = "SandboxChanged"
	// EventFailedCreatePodSandBox (Warning): RunPodSandbox failed.
	EventFailedCreatePodSandBox = "FailedCreatePodSandBox"
	// EventFailedPodSandBoxStatus (Warning): the new sandbox's status could
	// not be read.
	EventFailedPodSandBoxStatus = "FailedPodSandBoxStatus"
)

// events records the Manager's events; a nil recorder records nothing.
type events struct {
	rec runtime.EventRecorder
}

// containerFieldPath returns the field path of the named container in the
// pod's spec, as the kubelet's events carry it: spec.containers{name},
// spec.initContainers{name} or spec.ephemeralContainers{name}; false when
// the pod has no such container.
func containerFieldPath(pod *v1.Pod, name string) (string, bool) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return "spec.containers{" + name + "}", true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return "spec.initContainers{" + name + "}", true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return "spec.ephemeralContainers{" + name + "}", true
		}
	}
	return "", false
}

// pod records an event about the whole pod.
func (e events) pod(pod *v1.Pod, eventType, reason, message string) {
	if e.rec == nil || pod == nil {
		return
	}
	e.rec.Event(runtime.PodReference(pod, ""), eventType, reason, message)
}

// container records an event about one container of the pod. As the
// kubelet, it names the container instead of its runtime ID (containerID,
// when known) in the message, so that events of successive instances
// aggregate, and records nothing for a container not in the pod's spec.
func (e events) container(pod *v1.Pod, c *v1.Container, containerID, eventType, reason, message string) {
	if e.rec == nil || pod == nil || c == nil {
		return
	}
	path, ok := containerFieldPath(pod, c.Name)
	if !ok {
		return
	}
	if containerID != "" {
		message = strings.ReplaceAll(message, containerID, c.Name)
	}
	e.rec.Event(runtime.PodReference(pod, path), eventType, reason, message)
}

// errorMessage is what an event says of a runtime error: the message of
// its gRPC status (without the "rpc error: code = ..." prefix), or the
// error's text.
func errorMessage(err error) string {
	s, _ := status.FromError(err)
	return s.Message()
}
