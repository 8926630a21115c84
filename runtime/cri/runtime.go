package cri

import (
	"context"
	"fmt"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// Version implements runtime.RuntimeService.
func (c *Client) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
	if err != nil {
		return nil, wrap("Version", "", err)
	}
	return resp, nil
}

// Status implements runtime.RuntimeService.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, wrap("Status", "", err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("cri: Status: %w", errNilResponse)
	}
	return resp, nil
}

// RunPodSandbox implements runtime.RuntimeService. As in the kubelet, the
// call gets twice the per-call timeout: creating a sandbox sets up its
// network, which can be slow.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*c.timeout)
	defer cancel()
	resp, err := c.rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", wrap("RunPodSandbox", podName(config), err)
	}
	if resp.GetPodSandboxId() == "" {
		return "", fmt.Errorf("cri: RunPodSandbox %s: the runtime returned no sandbox ID", podName(config))
	}
	return resp.PodSandboxId, nil
}

func podName(config *runtimeapi.PodSandboxConfig) string {
	md := config.GetMetadata()
	return md.GetNamespace() + "/" + md.GetName()
}

// StopPodSandbox implements runtime.RuntimeService.
func (c *Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.rc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
	return wrap("StopPodSandbox", podSandboxID, err)
}

// RemovePodSandbox implements runtime.RuntimeService.
func (c *Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.rc.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
	return wrap("RemovePodSandbox", podSandboxID, err)
}

// PodSandboxStatus implements runtime.RuntimeService.
func (c *Client) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
	if err != nil {
		return nil, wrap("PodSandboxStatus", podSandboxID, err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("cri: PodSandboxStatus %s: %w", podSandboxID, errNilResponse)
	}
	return resp, nil
}

// ListPodSandbox implements runtime.RuntimeService.
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, wrap("ListPodSandbox", "", err)
	}
	return resp.Items, nil
}

// CreateContainer implements runtime.RuntimeService.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  podSandboxID,
		Config:        config,
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		return "", wrap("CreateContainer", podSandboxID+"/"+config.GetMetadata().GetName(), err)
	}
	if resp.GetContainerId() == "" {
		return "", fmt.Errorf("cri: CreateContainer %s/%s: the runtime returned no container ID", podSandboxID, config.GetMetadata().GetName())
	}
	return resp.ContainerId, nil
}

// StartContainer implements runtime.RuntimeService.
func (c *Client) StartContainer(ctx context.Context, containerID string) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
	return wrap("StartContainer", containerID, err)
}

// StopContainer implements runtime.RuntimeService. The call gets the
// grace period (timeout, in seconds) plus the per-call timeout, as in the
// kubelet.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+time.Duration(max(timeout, 0))*time.Second)
	defer cancel()
	_, err := c.rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
	return wrap("StopContainer", containerID, err)
}

// RemoveContainer implements runtime.RuntimeService.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.rc.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
	return wrap("RemoveContainer", containerID, err)
}

// ListContainers implements runtime.RuntimeService.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, wrap("ListContainers", "", err)
	}
	return resp.Containers, nil
}

// ContainerStatus implements runtime.RuntimeService.
func (c *Client) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
	if err != nil {
		return nil, wrap("ContainerStatus", containerID, err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("cri: ContainerStatus %s: %w", containerID, errNilResponse)
	}
	return resp, nil
}

// UpdateContainerResources implements runtime.RuntimeService.
func (c *Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	req := &runtimeapi.UpdateContainerResourcesRequest{ContainerId: containerID}
	if resources != nil {
		req.Linux = resources.Linux
		req.Windows = resources.Windows
	}
	_, err := c.rc.UpdateContainerResources(ctx, req)
	return wrap("UpdateContainerResources", containerID, err)
}

// ExecSync implements runtime.RuntimeService: it runs cmd in the container
// and returns its output. A command that exits non-zero gives a
// k8s.io/utils/exec.CodeExitError (its ExitStatus is the exit code),
// together with the output, as the kubelet's CRI client does. The call
// gets timeout plus the per-call timeout, leaving the runtime time to clean
// up; a zero timeout means no timeout.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout+c.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	resp, err := c.rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{
		ContainerId: containerID,
		Cmd:         cmd,
		Timeout:     int64(timeout.Seconds()),
	})
	if err != nil {
		return nil, nil, wrap("ExecSync", containerID, err)
	}
	if resp.ExitCode != 0 {
		return resp.Stdout, resp.Stderr, utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr),
			Code: int(resp.ExitCode),
		}
	}
	return resp.Stdout, resp.Stderr, nil
}
