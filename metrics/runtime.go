package metrics

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Runtime returns rs with every call counted and timed in
// kubelet_runtime_operations_total, _errors_total and _duration_seconds by
// the kubelet's operation names, and the sandboxes and containers created
// counted in kubelet_started_pods_total and
// kubelet_started_containers_total (by container_type), as the kubelet's
// instrumented runtime service does. The result keeps rs's
// ContainerEventStreamer capability and forwards runtime.WireLister;
// Unwrap returns rs.
func (k *Kubelet) Runtime(rs runtime.RuntimeService) runtime.RuntimeService {
	if rs == nil {
		return nil
	}
	r := &instrumentedRuntime{rs: rs, k: k}
	if es, ok := rs.(runtime.ContainerEventStreamer); ok {
		return &struct {
			*instrumentedRuntime
			runtime.ContainerEventStreamer
		}{r, es}
	}
	return r
}

// Images returns is with every call counted as Runtime does, and the time
// each pod's images took to pull remembered for
// kubelet_pod_start_sli_duration_seconds.
func (k *Kubelet) Images(is runtime.ImageService) runtime.ImageService {
	if is == nil {
		return nil
	}
	return &instrumentedImages{is: is, k: k}
}

type instrumentedRuntime struct {
	rs runtime.RuntimeService
	k  *Kubelet
}

// Unwrap returns the runtime wrapped.
func (r *instrumentedRuntime) Unwrap() runtime.RuntimeService { return r.rs }

func (r *instrumentedRuntime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	start := time.Now()
	v, err := r.rs.Version(ctx, apiVersion)
	r.k.recordOperation("version", start, err)
	return v, err
}

func (r *instrumentedRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	start := time.Now()
	v, err := r.rs.Status(ctx, verbose)
	r.k.recordOperation("status", start, err)
	return v, err
}

func (r *instrumentedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	r.k.startedPods.Inc()
	start := time.Now()
	v, err := r.rs.RunPodSandbox(ctx, config, runtimeHandler)
	r.k.recordOperation("run_podsandbox", start, err)
	return v, err
}

func (r *instrumentedRuntime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := r.rs.StopPodSandbox(ctx, podSandboxID)
	r.k.recordOperation("stop_podsandbox", start, err)
	return err
}

func (r *instrumentedRuntime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := r.rs.RemovePodSandbox(ctx, podSandboxID)
	r.k.recordOperation("remove_podsandbox", start, err)
	return err
}

func (r *instrumentedRuntime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	start := time.Now()
	v, err := r.rs.PodSandboxStatus(ctx, podSandboxID, verbose)
	r.k.recordOperation("podsandbox_status", start, err)
	return v, err
}

func (r *instrumentedRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	v, err := r.rs.ListPodSandbox(ctx, filter)
	r.k.recordOperation("list_podsandbox", start, err)
	return v, err
}

// ListPodSandboxWire forwards runtime.WireLister, counted as
// ListPodSandbox, when the runtime wrapped has it.
func (r *instrumentedRuntime) ListPodSandboxWire(ctx context.Context, filter *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error) {
	wl, ok := r.rs.(runtime.WireLister)
	if !ok {
		return nil, fmt.Errorf("metrics: %T lists only decoded messages: %w", r.rs, runtime.ErrUnimplemented)
	}
	start := time.Now()
	v, err := wl.ListPodSandboxWire(ctx, filter, buf)
	r.k.recordOperation("list_podsandbox", start, err)
	return v, err
}

// containerTypeLabel maps nodekit's container type annotation to the
// kubelet's container_type label.
func containerTypeLabel(config *runtimeapi.ContainerConfig) string {
	switch config.GetAnnotations()[runtime.AnnotationContainerType] {
	case runtime.ContainerTypeInit:
		return "init_container"
	case "ephemeral":
		return "ephemeral_container"
	}
	return "container"
}

func (r *instrumentedRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.k.startedContainers.WithLabelValues(containerTypeLabel(config)).Inc()
	start := time.Now()
	v, err := r.rs.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	r.k.recordOperation("create_container", start, err)
	return v, err
}

func (r *instrumentedRuntime) StartContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.rs.StartContainer(ctx, containerID)
	r.k.recordOperation("start_container", start, err)
	return err
}

func (r *instrumentedRuntime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	start := time.Now()
	err := r.rs.StopContainer(ctx, containerID, timeout)
	r.k.recordOperation("stop_container", start, err)
	return err
}

func (r *instrumentedRuntime) RemoveContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.rs.RemoveContainer(ctx, containerID)
	r.k.recordOperation("remove_container", start, err)
	return err
}

func (r *instrumentedRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := time.Now()
	v, err := r.rs.ListContainers(ctx, filter)
	r.k.recordOperation("list_containers", start, err)
	return v, err
}

// ListContainersWire forwards runtime.WireLister, counted as
// ListContainers, when the runtime wrapped has it.
func (r *instrumentedRuntime) ListContainersWire(ctx context.Context, filter *runtimeapi.ContainerFilter, buf []byte) ([]byte, error) {
	wl, ok := r.rs.(runtime.WireLister)
	if !ok {
		return nil, fmt.Errorf("metrics: %T lists only decoded messages: %w", r.rs, runtime.ErrUnimplemented)
	}
	start := time.Now()
	v, err := wl.ListContainersWire(ctx, filter, buf)
	r.k.recordOperation("list_containers", start, err)
	return v, err
}

func (r *instrumentedRuntime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	start := time.Now()
	v, err := r.rs.ContainerStatus(ctx, containerID, verbose)
	r.k.recordOperation("container_status", start, err)
	return v, err
}

func (r *instrumentedRuntime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	start := time.Now()
	err := r.rs.UpdateContainerResources(ctx, containerID, resources)
	r.k.recordOperation("update_container", start, err)
	return err
}

func (r *instrumentedRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	start := time.Now()
	o, e, err := r.rs.ExecSync(ctx, containerID, cmd, timeout)
	r.k.recordOperation("exec_sync", start, err)
	return o, e, err
}

type instrumentedImages struct {
	is runtime.ImageService
	k  *Kubelet
}

func (r *instrumentedImages) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	start := time.Now()
	v, err := r.is.ListImages(ctx, filter)
	r.k.recordOperation("list_images", start, err)
	return v, err
}

func (r *instrumentedImages) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	start := time.Now()
	v, err := r.is.ImageStatus(ctx, image, verbose)
	r.k.recordOperation("image_status", start, err)
	return v, err
}

func (r *instrumentedImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	uid := podSandboxConfig.GetMetadata().GetUid()
	start := time.Now()
	r.k.starts.pullStarted(uid, start)
	v, err := r.is.PullImage(ctx, image, auth, podSandboxConfig)
	end := time.Now()
	r.k.starts.pullFinished(uid, end)
	r.k.recordOperation("pull_image", start, err)
	return v, err
}

func (r *instrumentedImages) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	start := time.Now()
	err := r.is.RemoveImage(ctx, image)
	r.k.recordOperation("remove_image", start, err)
	return err
}
