package runtime

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeService is the part of the CRI runtime service nodekit calls. Its
// method set is a subset of k8s.io/cri-api/pkg/apis.RuntimeService with the
// same signatures, so any CRI implementation satisfies it. As with a CRI
// client, the configs and requests it is given are read-only and are not
// kept past the call: the caller may use them again (the runtime manager
// creates a sandbox's containers with the sandbox's config).
type RuntimeService interface {
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)

	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)

	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, containerID string) error
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	RemoveContainer(ctx context.Context, containerID string) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error)
}

// ImageService is the part of the CRI image service nodekit calls, a subset
// of k8s.io/cri-api/pkg/apis.ImageManagerService.
type ImageService interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
}

// ContainerEventStreamer is an optional capability of a RuntimeService: a
// stream of container events (CRI GetContainerEvents). Discover it with a
// type assertion.
type ContainerEventStreamer interface {
	GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// FilteredEventStreamer is an optional capability of a
// ContainerEventStreamer: GetContainerEventsFiltered is GetContainerEvents
// without the events keep returns false for. A wrapper that filters the
// stream (a scoped runtime's) uses it, where it would otherwise run a
// goroutine between the stream and its caller. keep is called on the
// streamer's goroutine, one event at a time, and must not block.
type FilteredEventStreamer interface {
	GetContainerEventsFiltered(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient), keep func(*runtimeapi.ContainerEventResponse) bool) error
}
