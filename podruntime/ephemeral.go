package podruntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// ephemeralContainersToStart returns the indexes into
// Spec.EphemeralContainers of the ephemeral containers SyncPod starts, as
// the kubelet's computePodActions: those with no instance at all in the
// runtime. An ephemeral container runs once: one that exited, or whose
// instance is in any state, is never started again.
func ephemeralContainersToStart(pod *v1.Pod, status *runtime.PodStatus) []int {
	var out []int
	for i := range pod.Spec.EphemeralContainers {
		if status.FindContainerStatusByName(pod.Spec.EphemeralContainers[i].Name) == nil {
			out = append(out, i)
		}
	}
	return out
}

// ephemeralTargetID returns the runtime ID of the container whose process
// namespace the ephemeral container ec joins (its targetContainerName), ""
// when it names none. As the kubelet, the target's newest instance is
// taken, whatever its state; a target with no instance is an error, which
// fails the start with CreateContainerConfigError.
func ephemeralTargetID(ec *v1.EphemeralContainer, status *runtime.PodStatus) (string, error) {
	if ec == nil || ec.TargetContainerName == "" {
		return "", nil
	}
	cs := status.FindContainerStatusByName(ec.TargetContainerName)
	if cs == nil {
		return "", fmt.Errorf("unable to find target container %s", ec.TargetContainerName)
	}
	return cs.ID, nil
}

// withTargetNamespace makes a container join the PID namespace of the
// container targetID, as the kubelet's determineEffectiveSecurityContext:
// only when the pod gives each container its own PID namespace (neither
// hostPID nor shareProcessNamespace, where every container already sees
// the others).
func withTargetNamespace(sc *runtimeapi.LinuxContainerSecurityContext, targetID string) {
	if targetID == "" || sc == nil || sc.NamespaceOptions == nil {
		return
	}
	if sc.NamespaceOptions.Pid == runtimeapi.NamespaceMode_CONTAINER {
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
		sc.NamespaceOptions.TargetId = targetID
	}
}

// ephemeralSpec is the container to start for the ephemeral container at
// index i of the pod.
func ephemeralSpec(pod *v1.Pod, i int) containerSpec {
	ec := &pod.Spec.EphemeralContainers[i]
	return containerSpec{container: (*v1.Container)(&ec.EphemeralContainerCommon), index: i, typ: runtime.ContainerTypeEphemeral, ephemeral: ec}
}

// findContainerSpec returns the spec of the named container of the pod:
// an app, init or ephemeral container (the kubelet's GetContainerSpec), or
// nil.
func findContainerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
	}
	return nil
}
