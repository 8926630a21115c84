package logs

import (
	"context"
	"fmt"
	"io"

	"github.com/nodekit/nodekit/podmodel"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// StatusFunc returns the latest status the agent computed for a pod, and
// whether it has one.
type StatusFunc func(pod *v1.Pod) (v1.PodStatus, bool)

// Provider serves the logs of a pod's containers from their CRI log
// files, as the kubelet's GetKubeletContainerLogs does. It is safe for
// concurrent use; its fields must not change after the first call.
type Provider struct {
	// Runtime gives the log path of a container instance, and tells a
	// follow when the container stops. Required.
	Runtime ContainerStatuser
	// Status gives the agent's status of a pod; without one (or when it
	// has none for the pod), the pod's own Status is used, as the kubelet
	// does after a restart.
	Status StatusFunc
	// Clock drives the periodic checks of a follow. Defaults to the real
	// clock.
	Clock clock.Clock
}

// ContainerLogs writes the log of container containerName of pod to
// stdout and stderr (either may be nil to skip that stream). The errors
// are the kubelet's, for the caller to return as 400 Bad Request.
func (p *Provider) ContainerLogs(ctx context.Context, pod *v1.Pod, containerName string, apiOpts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	status := pod.Status
	if p.Status != nil {
		if s, ok := p.Status(pod); ok {
			status = s
		}
	}
	id, err := ContainerIDForLogs(pod.Name, &status, containerName, apiOpts.Previous)
	if err != nil {
		return err
	}
	// A zero-byte write before the runtime is asked makes sure the writer
	// has seen one Write even while a follow waits for output.
	if stdout != nil {
		if _, err := stdout.Write(nil); err != nil {
			return err
		}
	}
	resp, err := p.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return fmt.Errorf("unable to retrieve container logs for %s", id)
	}
	st := resp.GetStatus()
	if st == nil {
		return fmt.Errorf("container status is nil for %s", id)
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	opts := NewOptions(apiOpts, clk.Now())
	opts.Clock = clk
	return Read(ctx, st.GetLogPath(), id, opts, p.Runtime, stdout, stderr)
}

// ContainerIDForLogs picks the runtime ID of the container instance whose
// log to read from a pod status, as the kubelet's
// validateContainerLogStatus does: the previous terminated instance with
// previous, else the running one, else the last terminated one. Its errors
// are the kubelet's.
func ContainerIDForLogs(podName string, status *v1.PodStatus, containerName string, previous bool) (string, error) {
	cs, found := containerStatus(status.ContainerStatuses, containerName)
	if !found {
		cs, found = containerStatus(status.InitContainerStatuses, containerName)
	}
	if !found {
		cs, found = containerStatus(status.EphemeralContainerStatuses, containerName)
	}
	if !found {
		return "", fmt.Errorf("container %q in pod %q is not available", containerName, podName)
	}
	last := cs.LastTerminationState
	waiting, running, terminated := cs.State.Waiting, cs.State.Running, cs.State.Terminated
	var cID string
	switch {
	case previous:
		if last.Terminated == nil || last.Terminated.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", containerName, podName)
		}
		cID = last.Terminated.ContainerID
	case running != nil:
		cID = cs.ContainerID
	case terminated != nil:
		// When the next instance did not start, the terminated state
		// has no ID: read the last terminated one.
		if terminated.ContainerID == "" {
			if last.Terminated == nil || last.Terminated.ContainerID == "" {
				return "", fmt.Errorf("container %q in pod %q is terminated", containerName, podName)
			}
			cID = last.Terminated.ContainerID
		} else {
			cID = terminated.ContainerID
		}
	case last.Terminated != nil:
		if last.Terminated.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", containerName, podName)
		}
		cID = last.Terminated.ContainerID
	case waiting != nil:
		switch reason := waiting.Reason; reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", containerName, podName)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", containerName, podName)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", containerName, podName, reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", containerName, podName)
	}
	// IDs are "<type>://<id>".
	id, ok := podmodel.RuntimeContainerID(cID)
	if !ok || id == "" {
		return "", fmt.Errorf("unable to parse container ID %q: invalid container ID", cID)
	}
	return id, nil
}

func containerStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}
