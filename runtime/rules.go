package runtime

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// The decisions of a pod sync that the API status shows too: the pod
// runtime (package podruntime) acts on them, package status reports them.
// Each is a pure function of the pod and its PodStatus.

// NetworkNamespaceMode is the network namespace mode of the pod's sandbox:
// NODE on the host network, POD otherwise.
func NetworkNamespaceMode(pod *v1.Pod) runtimeapi.NamespaceMode {
	if pod.Spec.HostNetwork {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// The messages of the PodReadyToStartContainers condition when the pod
// needs a new sandbox, as the kubelet words them.
const (
	sandboxMessageNoSandbox            = "no pod sandbox exists"
	sandboxMessageMultipleSandboxes    = "multiple pod sandboxes are ready and need to be reconciled"
	sandboxMessageNotReady             = "pod sandbox is not ready"
	sandboxMessageNetworkNamespaceMode = "network namespace mode changed and sandbox needs to be recreated"
	sandboxMessageNoIPAddress          = "pod sandbox has no IP address"
)

// PodSandboxChanged reports whether a sync creates a new sandbox for the
// pod (the kubelet's PodSandboxChanged): none yet, none or several ready,
// a changed network namespace mode, or no IP for a pod-network sandbox.
// It returns the attempt number of the new sandbox (that of the current
// one when it is kept), the ID of the current sandbox ("" when there is
// none, or when the network mode changed) and the kubelet's message of
// why a new one is needed, "" when the sandbox is kept.
func PodSandboxChanged(pod *v1.Pod, status *PodStatus) (changed bool, attempt uint32, sandboxID, message string) {
	if status == nil || len(status.SandboxStatuses) == 0 {
		return true, 0, "", sandboxMessageNoSandbox
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	s := status.SandboxStatuses[0]
	attempt = s.GetMetadata().GetAttempt()
	if ready > 1 {
		return true, attempt + 1, s.GetId(), sandboxMessageMultipleSandboxes
	}
	if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true, attempt + 1, s.GetId(), sandboxMessageNotReady
	}
	if s.GetLinux().GetNamespaces().GetOptions().GetNetwork() != NetworkNamespaceMode(pod) {
		return true, attempt + 1, "", sandboxMessageNetworkNamespaceMode
	}
	if !pod.Spec.HostNetwork && s.GetNetwork() != nil && s.GetNetwork().GetIp() == "" {
		return true, attempt + 1, s.GetId(), sandboxMessageNoIPAddress
	}
	return false, attempt, s.GetId(), ""
}

// ShouldContainerBeRestarted is the kubelet's ShouldContainerBeRestarted:
// whether a sync starts the container: one never started, in an unknown
// or created state, or exited when its restart rules, its own restart
// policy or the pod's allow it (podmodel.ContainerShouldRestart); none of a
// pod being deleted.
func ShouldContainerBeRestarted(c *v1.Container, pod *v1.Pod, status *PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil {
		return true
	}
	switch cs.State {
	case ContainerStateRunning:
		return false
	case ContainerStateUnknown, ContainerStateCreated:
		return true
	}
	return podmodel.ContainerShouldRestart(c, &pod.Spec, cs.ExitCode)
}

// HasAnyActiveRegularContainerStarted reports whether the pod's
// initialization finished in its current sandbox: an app container has an
// instance there (the kubelet's function of the same name). A container
// left over from an earlier sandbox does not count. The API status's phase
// is judged with it.
func HasAnyActiveRegularContainerStarted(pod *v1.Pod, status *PodStatus) bool {
	for i := range pod.Spec.Containers {
		if status.FindActiveContainerStatusByName(pod.Spec.Containers[i].Name) != nil {
			return true
		}
	}
	return false
}

// HasAnyRegularContainerCreated reports whether an app container has an
// instance (created, running or exited) in any sandbox (the kubelet's
// function of the same name): the pod was initialized at some point, so
// an init container missing from the runtime has completed.
func HasAnyRegularContainerCreated(pod *v1.Pod, status *PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs != nil && cs.State != ContainerStateUnknown {
			return true
		}
	}
	return false
}
