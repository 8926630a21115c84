package runtimetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// Exit codes and reasons of the containers this runtime stops.
const (
	exitKilled      = 137 // 128 + SIGKILL
	reasonCompleted = "Completed"
	reasonError     = "Error"
)

// container is the runtime's record of a container. Its fields change
// only under Runtime.mu; list and status are immutable views rebuilt by
// publish after every change.
type container struct {
	id          string
	sb          *sandbox
	meta        *runtimeapi.ContainerMetadata
	image       *runtimeapi.ImageSpec
	imageRef    string
	labels      map[string]string
	annotations map[string]string
	command     []string
	args        []string
	logPath     string
	mounts      []*runtimeapi.Mount
	resources   *runtimeapi.ContainerResources
	state       runtimeapi.ContainerState
	createdAt   int64
	startedAt   int64
	finishedAt  int64
	exitCode    int32
	reason      string
	message     string
	prog        program
	timer       *time.Timer
	stopTimeout int64
	stopped     bool // StopContainer was called; stopTimeout is set
	gone        bool

	list   *runtimeapi.Container
	status *runtimeapi.ContainerStatus
}

func (c *container) publish() {
	c.list = &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sb.id,
		Metadata:     c.meta,
		Image:        c.image,
		ImageRef:     c.imageRef,
		ImageId:      c.imageRef,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       c.labels,
		Annotations:  c.annotations,
	}
	c.status = &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.meta,
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.image,
		ImageRef:    c.imageRef,
		ImageId:     c.imageRef,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      c.labels,
		Annotations: c.annotations,
		Mounts:      c.mounts,
		LogPath:     c.logPath,
		Resources:   c.resources,
	}
}

func (c *container) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

func now() int64 { return time.Now().UnixNano() }

// CreateContainer implements runtime.RuntimeService. The sandbox must
// exist and be ready, and the image must be present (pulled, or listed in
// Options.Images, or added with ImageAdd).
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter(ctx, "CreateContainer"); err != nil {
		return "", err
	}
	defer r.waitEvents(ctx)
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "runtimetest: container config has no metadata")
	}
	c := &container{
		meta:        &runtimeapi.ContainerMetadata{Name: config.Metadata.Name, Attempt: config.Metadata.Attempt},
		labels:      cloneLabels(config.Labels),
		annotations: cloneLabels(config.Annotations),
		command:     slices.Clone(config.Command),
		args:        slices.Clone(config.Args),
		logPath:     config.LogPath,
		state:       runtimeapi.ContainerState_CONTAINER_CREATED,
	}
	if config.LogPath != "" && sandboxConfig.GetLogDirectory() != "" {
		c.logPath = sandboxConfig.GetLogDirectory() + "/" + config.LogPath
	}
	if len(config.Mounts) > 0 {
		c.mounts = make([]*runtimeapi.Mount, len(config.Mounts))
		for i, m := range config.Mounts {
			c.mounts[i] = proto.Clone(m).(*runtimeapi.Mount)
		}
	}
	if res := config.GetLinux().GetResources(); res != nil {
		c.resources = &runtimeapi.ContainerResources{Linux: proto.Clone(res).(*runtimeapi.LinuxContainerResources)}
	}
	c.prog = parseProgram(c.command, c.args)
	ref := config.GetImage().GetImage()

	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return "", notFound("sandbox", podSandboxID)
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", status.Errorf(codes.FailedPrecondition, "runtimetest: sandbox %q is not ready", podSandboxID)
	}
	img := r.findImageLocked(ref)
	if img == nil {
		return "", status.Errorf(codes.NotFound, "runtimetest: image %q not found", ref)
	}
	c.image = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: config.GetImage().GetUserSpecifiedImage()}
	c.imageRef = img.id
	c.sb = s
	c.id = r.newIDLocked()
	c.createdAt = now()
	c.publish()
	r.containers[c.id] = c
	r.ctrList = append(r.ctrList, c)
	indexAdd(r.containersByPod, c.labels[podUIDLabel], c)
	s.containers = append(s.containers, c)
	r.emitLocked(c.id, s, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return c.id, nil
}

// StartContainer implements runtime.RuntimeService: the container runs its
// program (see the package documentation). Only a created container in a
// ready sandbox can start.
func (r *Runtime) StartContainer(ctx context.Context, containerID string) error {
	if err := r.enter(ctx, "StartContainer"); err != nil {
		return err
	}
	defer r.waitEvents(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "runtimetest: container %q is in state %s, not created", containerID, c.state)
	}
	if c.sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return status.Errorf(codes.FailedPrecondition, "runtimetest: sandbox %q of container %q is not ready", c.sb.id, containerID)
	}
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = now()
	c.publish()
	r.emitLocked(c.id, c.sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if !c.prog.forever && !r.closed {
		code := c.prog.code
		c.timer = time.AfterFunc(c.prog.d, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if c.gone || c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
				return
			}
			c.timer = nil
			r.exitLocked(c, code, "", "")
		})
	}
	return nil
}

// exitLocked moves a running container to exited. An empty reason becomes
// "Completed" for code 0 and "Error" otherwise.
func (r *Runtime) exitLocked(c *container, code int32, reason, message string) {
	c.stopTimer()
	if reason == "" {
		reason = reasonCompleted
		if code != 0 {
			reason = reasonError
		}
	}
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.exitCode = code
	c.reason = reason
	c.message = message
	c.finishedAt = now()
	c.publish()
	if l := r.log.V(4); l.Enabled() {
		l.Info("container exited", "containerID", c.id, "exitCode", code, "reason", reason)
	}
	r.emitLocked(c.id, c.sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// ExitContainer makes a running container exit now with code and reason
// (an empty reason becomes "Completed" for code 0, "Error" otherwise). It
// fails with NotFound for an unknown container and FailedPrecondition for
// one that is not running.
func (r *Runtime) ExitContainer(id string, code int32, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return notFound("container", id)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Errorf(codes.FailedPrecondition, "runtimetest: container %q is in state %s, not running", id, c.state)
	}
	r.exitLocked(c, code, reason, "")
	return nil
}

// StopContainer implements runtime.RuntimeService: a running container
// exits at once with code 137 and reason "Error", whatever the timeout
// (recorded for LastStopTimeout). Stopping a container that is not running
// does nothing.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	if err := r.enter(ctx, "StopContainer"); err != nil {
		return err
	}
	defer r.waitEvents(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	c.stopTimeout, c.stopped = timeout, true
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exitLocked(c, exitKilled, reasonError, "")
	}
	return nil
}

// LastStopTimeout returns the timeout of the last StopContainer call for
// the container, and false if it was never stopped (or is unknown).
func (r *Runtime) LastStopTimeout(id string) (int64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.containers[id]
	if !ok || !c.stopped {
		return 0, false
	}
	return c.stopTimeout, true
}

// RemoveContainer implements runtime.RuntimeService: a running container
// is killed first. Removing a container that does not exist succeeds, as
// the CRI requires.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	if err := r.enter(ctx, "RemoveContainer"); err != nil {
		return err
	}
	defer r.waitEvents(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[containerID]; ok {
		r.removeContainerLocked(c)
	}
	return nil
}

func (r *Runtime) removeContainerLocked(c *container) {
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exitLocked(c, exitKilled, reasonError, "")
	}
	c.stopTimer()
	delete(r.containers, c.id)
	indexRemove(r.containersByPod, c.labels[podUIDLabel], c)
	c.gone = true
	r.ctrGone++
	r.ctrList = compact(r.ctrList, &r.ctrGone, func(c *container) bool { return c.gone })
	if i := slices.Index(c.sb.containers, c); i >= 0 {
		c.sb.containers = slices.Delete(c.sb.containers, i, i+1)
	}
	r.shrinkLocked()
	r.emitLocked(c.id, c.sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
}

// ListContainers implements runtime.RuntimeService, in creation order. The
// filter's ID matches exactly or as a prefix.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := r.enter(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if filter == nil || (filter.Id == "" && filter.State == nil && filter.PodSandboxId == "" && len(filter.LabelSelector) == 0) {
		out := make([]*runtimeapi.Container, 0, len(r.containers))
		for _, c := range r.ctrList {
			if !c.gone {
				out = append(out, c.list)
			}
		}
		return out, nil
	}
	match := func(c *container) bool {
		if filter.State != nil && c.state != filter.State.State {
			return false
		}
		if filter.PodSandboxId != "" && c.sb.id != filter.PodSandboxId {
			return false
		}
		return matchLabels(c.labels, filter.LabelSelector)
	}
	if filter.Id != "" {
		if c, ok := r.containers[filter.Id]; ok {
			if match(c) {
				return []*runtimeapi.Container{c.list}, nil
			}
			return nil, nil
		}
	}
	candidates := r.ctrList
	if filter.PodSandboxId != "" {
		s, ok := r.sandboxes[filter.PodSandboxId]
		if !ok {
			return nil, nil
		}
		candidates = s.containers
	} else if uid, ok := filter.LabelSelector[podUIDLabel]; ok {
		candidates = r.containersByPod[uid]
	}
	var out []*runtimeapi.Container
	for _, c := range candidates {
		if c.gone || !strings.HasPrefix(c.id, filter.Id) || !match(c) {
			continue
		}
		out = append(out, c.list)
	}
	return out, nil
}

// ContainerStatus implements runtime.RuntimeService.
func (r *Runtime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if err := r.enter(ctx, "ContainerStatus"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.containers[containerID]
	if !ok {
		return nil, notFound("container", containerID)
	}
	return &runtimeapi.ContainerStatusResponse{Status: c.status}, nil
}

// UpdateContainerResources implements runtime.RuntimeService: the
// resources show in the container's status.
func (r *Runtime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	if err := r.enter(ctx, "UpdateContainerResources"); err != nil {
		return err
	}
	var res *runtimeapi.ContainerResources
	if resources != nil {
		res = proto.Clone(resources).(*runtimeapi.ContainerResources)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		return status.Errorf(codes.FailedPrecondition, "runtimetest: container %q has exited", containerID)
	}
	c.resources = res
	c.publish()
	return nil
}

// ExecSync implements runtime.RuntimeService with the handler set by
// SetExecHandler (by default: exit 0, no output). The container must be
// running. A non-zero exit code is returned as a
// k8s.io/utils/exec.CodeExitError, as the CRI client does. The timeout is
// not enforced; ctx is, before the handler runs.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if err := r.enter(ctx, "ExecSync"); err != nil {
		return nil, nil, err
	}
	r.mu.RLock()
	c, ok := r.containers[containerID]
	var state runtimeapi.ContainerState
	if ok {
		state = c.state
	}
	h := r.execHandler
	r.mu.RUnlock()
	if !ok {
		return nil, nil, notFound("container", containerID)
	}
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "runtimetest: container %q is in state %s, not running", containerID, state)
	}
	if h == nil {
		return nil, nil, nil
	}
	stdout, stderr, code := h(containerID, slices.Clone(cmd))
	if code != 0 {
		return stdout, stderr, utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr),
			Code: int(code),
		}
	}
	return stdout, stderr, nil
}
