package stats

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRIClient adapts a CRI gRPC client (runtime/cri.Client.RuntimeClient)
// to a Runtime.
func CRIClient(c runtimeapi.RuntimeServiceClient) Runtime { return criClient{c} }

type criClient struct {
	c runtimeapi.RuntimeServiceClient
}

func (c criClient) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r, err := c.c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	return r.GetItems(), err
}

func (c criClient) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r, err := c.c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	return r.GetContainers(), err
}

func (c criClient) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	r, err := c.c.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	return r.GetStats(), err
}

func (c criClient) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r, err := c.c.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	return r.GetStats(), err
}
