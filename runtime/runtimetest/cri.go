package runtimetest

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Compile-time checks: CRI is a complete cri-api runtime and image service.
var (
	_ cri.RuntimeService      = CRI{}
	_ cri.ImageManagerService = CRI{}
)

// CRI wraps a Runtime for code written against k8s.io/cri-api's
// RuntimeService and ImageManagerService, whose method sets are larger
// than nodekit's. The methods nodekit does not use (streaming, stats,
// checkpoints, runtime config) answer with an Unimplemented status, and
// Close(ctx) closes the Runtime.
type CRI struct {
	*Runtime
}

// CRI returns r wrapped for k8s.io/cri-api's interfaces.
func (r *Runtime) CRI() CRI { return CRI{r} }

func unimplemented(method string) error {
	return status.Errorf(codes.Unimplemented, "runtimetest: %s is not implemented", method)
}

// Close closes the Runtime (cri-api's Close).
func (c CRI) Close(context.Context) error {
	c.Runtime.Close()
	return nil
}

// Exec answers Unimplemented.
func (c CRI) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, unimplemented("Exec")
}

// Attach answers Unimplemented.
func (c CRI) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, unimplemented("Attach")
}

// PortForward answers Unimplemented.
func (c CRI) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, unimplemented("PortForward")
}

// ReopenContainerLog answers Unimplemented.
func (c CRI) ReopenContainerLog(context.Context, string) error {
	return unimplemented("ReopenContainerLog")
}

// CheckpointContainer answers Unimplemented.
func (c CRI) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) error {
	return unimplemented("CheckpointContainer")
}

// UpdatePodSandboxResources answers Unimplemented.
func (c CRI) UpdatePodSandboxResources(context.Context, *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return nil, unimplemented("UpdatePodSandboxResources")
}

// CheckpointPod answers Unimplemented.
func (c CRI) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) error {
	return unimplemented("CheckpointPod")
}

// RestorePod answers Unimplemented.
func (c CRI) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, unimplemented("RestorePod")
}

// ContainerStats answers Unimplemented.
func (c CRI) ContainerStats(context.Context, string) (*runtimeapi.ContainerStats, error) {
	return nil, unimplemented("ContainerStats")
}

// ListContainerStats answers Unimplemented.
func (c CRI) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, unimplemented("ListContainerStats")
}

// PodSandboxStats answers Unimplemented.
func (c CRI) PodSandboxStats(context.Context, string) (*runtimeapi.PodSandboxStats, error) {
	return nil, unimplemented("PodSandboxStats")
}

// ListPodSandboxStats answers Unimplemented.
func (c CRI) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, unimplemented("ListPodSandboxStats")
}

// ListMetricDescriptors answers Unimplemented.
func (c CRI) ListMetricDescriptors(context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	return nil, unimplemented("ListMetricDescriptors")
}

// ListPodSandboxMetrics answers Unimplemented.
func (c CRI) ListPodSandboxMetrics(context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	return nil, unimplemented("ListPodSandboxMetrics")
}

// UpdateRuntimeConfig answers Unimplemented.
func (c CRI) UpdateRuntimeConfig(context.Context, *runtimeapi.RuntimeConfig) error {
	return unimplemented("UpdateRuntimeConfig")
}

// RuntimeConfig answers Unimplemented.
func (c CRI) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return nil, unimplemented("RuntimeConfig")
}

// ImageFsInfo answers Unimplemented.
func (c CRI) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return nil, unimplemented("ImageFsInfo")
}
