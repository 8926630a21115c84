package backend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime"
)

// Compile-time checks: a Runtime is a complete nodekit runtime.
var (
	_ runtime.RuntimeService         = (*Runtime)(nil)
	_ runtime.ImageService           = (*Runtime)(nil)
	_ runtime.ContainerEventStreamer = (*Runtime)(nil)
)

// Options configure a Runtime. The zero value is usable.
type Options struct {
	// StateDir is where the Runtime keeps its records of sandboxes and
	// containers (one JSON file each), so that a Runtime made later on the
	// same directory, after the agent restarted, finds them again and
	// asks the Backend how their processes fared meanwhile. Defaults to
	// "": records live in memory and die with the Runtime.
	StateDir string
	// Name and Version are what the Version call reports (the runtime's
	// name prefixes container IDs in the API status: "name://ID").
	// Default to "backend" and "0.1.0".
	Name, Version string
	// PodIP is the address every sandbox reports. Processes of a backend
	// share the host's network, so the default is "127.0.0.1", where
	// HTTP and TCP probes reach them.
	PodIP string
	// Logger receives a line for every container exit (V(1)) and for
	// records it cannot write or read (V(0)). Defaults to discarding.
	Logger logr.Logger
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "backend"
	}
	if o.Version == "" {
		o.Version = "0.1.0"
	}
	if o.PodIP == "" {
		o.PodIP = "127.0.0.1"
	}
}

// Runtime is the adapter: nodekit's RuntimeService, ImageService and
// ContainerEventStreamer over a Backend. Create it with NewRuntime; Close
// it when done. It is safe for concurrent use.
//
// Objects it returns are fresh copies the caller may keep.
type Runtime struct {
	b     Backend
	opts  Options
	log   logr.Logger
	store store

	loadOnce sync.Once
	loadErr  error
	ctx      context.Context // ends at Close; waiters use it
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu         sync.RWMutex
	closed     bool
	sandboxes  map[string]*sandboxRecord
	containers map[string]*containerRecord
	images     map[string]*runtimeapi.Image // by reference
	subs       map[*subscriber]struct{}
}

// NewRuntime returns the adapter over b. It does no I/O and starts no
// goroutine: the records of Options.StateDir are read at the first call.
func NewRuntime(b Backend, opts Options) *Runtime {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Runtime{
		b:          b,
		opts:       opts,
		log:        opts.Logger.WithName("backend"),
		store:      store{dir: opts.StateDir},
		ctx:        ctx,
		cancel:     cancel,
		sandboxes:  map[string]*sandboxRecord{},
		containers: map[string]*containerRecord{},
		images:     map[string]*runtimeapi.Image{},
		subs:       map[*subscriber]struct{}{},
	}
}

// Close ends the event streams and stops watching the processes (they keep
// running; a new Runtime on the same StateDir finds them again). It waits
// for the Runtime's goroutines to end. Calls after Close fail with an
// Unavailable status. Close is idempotent.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		for s := range r.subs {
			r.endStreamLocked(s, status.Error(codes.Unavailable, "backend: runtime closed"))
		}
	}
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// enter is the start of every call: the records are loaded, and the
// Runtime is not closed.
func (r *Runtime) enter() error {
	r.loadOnce.Do(func() { r.loadErr = r.load() })
	if r.loadErr != nil {
		return r.loadErr
	}
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return status.Error(codes.Unavailable, "backend: runtime closed")
	}
	return nil
}

// load reads the records of StateDir and brings the state of the running
// containers up to date with the Backend.
func (r *Runtime) load() error {
	sandboxes, containers, err := r.store.load(r.log)
	if err != nil {
		return fmt.Errorf("backend: read state: %w", err)
	}
	r.mu.Lock()
	for _, s := range sandboxes {
		r.sandboxes[s.ID] = s
	}
	var running []*containerRecord
	for _, c := range containers {
		s := r.sandboxes[c.SandboxID]
		if s == nil {
			r.log.Info("container record without its sandbox, dropped", "containerID", c.ID, "podSandboxID", c.SandboxID)
			r.store.remove("containers", c.ID)
			continue
		}
		r.containers[c.ID] = c
		s.containers = append(s.containers, c)
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running = append(running, c)
		}
	}
	for _, s := range r.sandboxes {
		slices.SortFunc(s.containers, func(a, b *containerRecord) int { return int(a.CreatedAt - b.CreatedAt) })
	}
	r.mu.Unlock()
	for _, c := range running {
		st, err := r.b.Status(r.ctx, c.ID)
		switch {
		case runtime.IsNotFound(err):
			r.exited(c.ID, Status{ExitCode: 255, Reason: ReasonError, FinishedAt: time.Now(),
				Message: "the backend lost the container's process while the runtime was down"})
		case err != nil:
			r.log.Error(err, "container status unknown after restart", "containerID", c.ID)
			r.watch(c.ID)
		case !st.Running:
			r.exited(c.ID, st)
		default:
			r.watch(c.ID)
		}
	}
	return nil
}

// watch waits, in a goroutine of the Runtime, for the container's process
// to exit.
func (r *Runtime) watch(id string) {
	r.wg.Go(func() {
		st, err := r.b.Wait(r.ctx, id)
		if err != nil {
			if r.ctx.Err() == nil {
				r.log.Error(err, "waiting for container failed", "containerID", id)
			}
			return
		}
		r.exited(id, st)
	})
}

// exited records that the container's process ended, once.
func (r *Runtime) exited(id string, st Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = st.ExitCode
	c.Reason = st.Reason
	if c.Reason == "" {
		c.Reason = ReasonCompleted
		if st.ExitCode != 0 {
			c.Reason = ReasonError
		}
	}
	c.Message = st.Message
	c.PID = 0
	if st.FinishedAt.IsZero() {
		st.FinishedAt = time.Now()
	}
	c.FinishedAt = st.FinishedAt.UnixNano()
	r.saveLocked(c)
	if l := r.log.V(1); l.Enabled() {
		l.Info("container exited", "containerID", id, "exitCode", c.ExitCode, "reason", c.Reason)
	}
	r.emitLocked(c.ID, r.sandboxes[c.SandboxID], runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

func (r *Runtime) saveLocked(rec record) {
	if err := r.store.save(rec); err != nil {
		r.log.Error(err, "cannot write record", "id", rec.id())
	}
}

func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func notFound(kind, id string) error {
	return fmt.Errorf("backend: %s %q: %w", kind, id, runtime.ErrNotFound)
}

// Version implements runtime.RuntimeService.
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: r.opts.Name, RuntimeVersion: r.opts.Version, RuntimeApiVersion: "v1"}, nil
}

// Status implements runtime.RuntimeService: the runtime and the network
// are ready once the records are loaded.
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

// RunPodSandbox implements runtime.RuntimeService. A sandbox is a record
// only: no process runs for it. It is ready at once, with Options.PodIP.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if err := r.enter(); err != nil {
		return "", err
	}
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "backend: sandbox config has no metadata")
	}
	s := &sandboxRecord{
		ID:        newID(),
		Config:    cloneSandboxConfig(config),
		Handler:   runtimeHandler,
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: time.Now().UnixNano(),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.store.save(s); err != nil {
		return "", fmt.Errorf("backend: run sandbox: %w", err)
	}
	r.sandboxes[s.ID] = s
	r.emitLocked(s.ID, s, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.emitLocked(s.ID, s, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return s.ID, nil
}

// StopPodSandbox implements runtime.RuntimeService: its running containers
// are killed (no grace period, as containerd does) and it is no longer
// ready. An unknown sandbox is NotFound, as with containerd 1.6.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	if err := r.enter(); err != nil {
		return err
	}
	r.mu.RLock()
	s := r.sandboxes[podSandboxID]
	var ids []string
	if s != nil {
		for _, c := range s.containers {
			ids = append(ids, c.ID)
		}
	}
	r.mu.RUnlock()
	if s == nil {
		return notFound("sandbox", podSandboxID)
	}
	for _, id := range ids {
		if err := r.stop(ctx, id, 0); err != nil && !runtime.IsNotFound(err) {
			return fmt.Errorf("backend: stop sandbox %s: %w", podSandboxID, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY && r.sandboxes[s.ID] == s {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.saveLocked(s)
		r.emitLocked(s.ID, s, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	return nil
}

// RemovePodSandbox implements runtime.RuntimeService: the sandbox is
// stopped, then it and its containers are removed. Removing an unknown
// sandbox succeeds.
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	if err := r.StopPodSandbox(ctx, podSandboxID); err != nil {
		if runtime.IsNotFound(err) {
			return nil
		}
		return err
	}
	r.mu.RLock()
	s := r.sandboxes[podSandboxID]
	var ids []string
	if s != nil {
		for _, c := range s.containers {
			ids = append(ids, c.ID)
		}
	}
	r.mu.RUnlock()
	for _, id := range ids {
		if err := r.RemoveContainer(ctx, id); err != nil {
			return fmt.Errorf("backend: remove sandbox %s: %w", podSandboxID, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sandboxes[podSandboxID] != s || s == nil {
		return nil
	}
	if err := r.store.remove("sandboxes", s.ID); err != nil {
		return fmt.Errorf("backend: remove sandbox %s: %w", s.ID, err)
	}
	delete(r.sandboxes, s.ID)
	r.emitLocked(s.ID, s, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

// PodSandboxStatus implements runtime.RuntimeService.
func (r *Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := r.sandboxes[podSandboxID]
	if s == nil {
		return nil, notFound("sandbox", podSandboxID)
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: r.sandboxStatusLocked(s)}
	for _, c := range s.containers {
		resp.ContainersStatuses = append(resp.ContainersStatuses, c.status())
	}
	return resp, nil
}

func (r *Runtime) sandboxStatusLocked(s *sandboxRecord) *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id:             s.ID,
		Metadata:       s.metadata(),
		State:          s.State,
		CreatedAt:      s.CreatedAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: r.opts.PodIP},
		Labels:         cloneMap(s.Config.GetLabels()),
		Annotations:    cloneMap(s.Config.GetAnnotations()),
		RuntimeHandler: s.Handler,
	}
	if ns := s.Config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: ns.Network, Pid: ns.Pid, Ipc: ns.Ipc, TargetId: ns.TargetId,
		}}}
	}
	return st
}

// ListPodSandbox implements runtime.RuntimeService, oldest first. The
// filter's ID matches exactly or as a prefix.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*runtimeapi.PodSandbox
	for _, s := range r.sandboxes {
		if !strings.HasPrefix(s.ID, filter.GetId()) ||
			(filter.GetState() != nil && filter.GetState().GetState() != s.State) ||
			!matchLabels(s.Config.GetLabels(), filter.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             s.ID,
			Metadata:       s.metadata(),
			State:          s.State,
			CreatedAt:      s.CreatedAt,
			Labels:         cloneMap(s.Config.GetLabels()),
			Annotations:    cloneMap(s.Config.GetAnnotations()),
			RuntimeHandler: s.Handler,
		})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.PodSandbox) int {
		return cmpInt64(a.CreatedAt, b.CreatedAt, a.Id, b.Id)
	})
	return out, nil
}

// CreateContainer implements runtime.RuntimeService. The sandbox must be
// ready, and the config must give a command unless the backend knows its
// image's entrypoint (ImageCommander).
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter(); err != nil {
		return "", err
	}
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "backend: container config has no metadata")
	}
	ref := config.GetImage().GetImage()
	imageRef := imageID(ref)
	if _, ok := r.b.(ImageResolver); ok {
		id, err := r.resolve(ctx, ref)
		if err != nil {
			return "", fmt.Errorf("backend: image %q of container %q: %w", ref, config.GetMetadata().GetName(), err)
		}
		imageRef = id
	}
	command, args, err := r.command(ctx, imageRef, config)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sandboxes[podSandboxID]
	if s == nil {
		return "", notFound("sandbox", podSandboxID)
	}
	if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", status.Errorf(codes.FailedPrecondition, "backend: sandbox %q is not ready", podSandboxID)
	}
	c := &containerRecord{
		ID:        newID(),
		SandboxID: s.ID,
		Config:    withCommand(cloneContainerConfig(config), command, args),
		ImageRef:  imageRef,
		State:     runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: time.Now().UnixNano(),
	}
	if p := config.GetLogPath(); p != "" {
		c.LogPath = p
		if d := s.Config.GetLogDirectory(); d != "" && !strings.HasPrefix(p, "/") {
			c.LogPath = d + "/" + p
		}
	}
	if err := r.store.save(c); err != nil {
		return "", fmt.Errorf("backend: create container: %w", err)
	}
	r.containers[c.ID] = c
	s.containers = append(s.containers, c)
	r.emitLocked(c.ID, s, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return c.ID, nil
}

// StartContainer implements runtime.RuntimeService: Backend.Start runs the
// process. When it fails the container has exited with code 128 and
// reason StartError, and the error is returned, as with containerd.
func (r *Runtime) StartContainer(ctx context.Context, containerID string) error {
	if err := r.enter(); err != nil {
		return err
	}
	r.mu.Lock()
	c := r.containers[containerID]
	if c == nil {
		r.mu.Unlock()
		return notFound("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED || c.starting {
		r.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "backend: container %q is %s, not created", containerID, c.State)
	}
	s := r.sandboxes[c.SandboxID]
	if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		r.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "backend: sandbox %q of container %q is not ready", s.ID, containerID)
	}
	c.starting = true
	spec := Spec{
		Argv:       append(slices.Clone(c.Config.GetCommand()), c.Config.GetArgs()...),
		WorkingDir: c.Config.GetWorkingDir(),
		LogPath:    c.LogPath,
		Image:      c.Config.GetImage().GetImage(),
		ImageID:    c.ImageRef,
		Config:     c.Config,
		Sandbox: SandboxSpec{
			ID:           s.ID,
			Name:         s.Config.GetMetadata().GetName(),
			Namespace:    s.Config.GetMetadata().GetNamespace(),
			UID:          s.Config.GetMetadata().GetUid(),
			CgroupParent: s.Config.GetLinux().GetCgroupParent(),
			Hostname:     s.Config.GetHostname(),
		},
	}
	for _, kv := range c.Config.GetEnvs() {
		spec.Env = append(spec.Env, kv.GetKey()+"="+string(kv.GetValue()))
	}
	r.mu.Unlock()

	startErr := r.b.Start(ctx, containerID, spec)
	var st Status
	if startErr == nil {
		var err error
		if st, err = r.b.Status(ctx, containerID); err != nil {
			st = Status{Running: true, StartedAt: time.Now()}
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	c.starting = false
	if r.containers[containerID] != c {
		return notFound("container", containerID)
	}
	now := time.Now().UnixNano()
	c.StartedAt = now
	if !st.StartedAt.IsZero() {
		c.StartedAt = st.StartedAt.UnixNano()
	}
	if startErr != nil {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode, c.Reason, c.Message, c.FinishedAt = ExitCodeStartError, ReasonStartError, startErr.Error(), now
		r.saveLocked(c)
		r.emitLocked(c.ID, s, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		return fmt.Errorf("backend: start container %s: %w", containerID, startErr)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.PID = st.PID
	r.saveLocked(c)
	r.emitLocked(c.ID, s, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if !st.Running {
		// It exited already: the exit comes from Wait below, as for any.
		c.PID = 0
	}
	r.watch(containerID)
	return nil
}

// StopContainer implements runtime.RuntimeService: Backend.Stop with a
// grace period of timeout seconds. Stopping a container that is not
// running does nothing.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	if err := r.enter(); err != nil {
		return err
	}
	return r.stop(ctx, containerID, time.Duration(max(timeout, 0))*time.Second)
}

func (r *Runtime) stop(ctx context.Context, id string, grace time.Duration) error {
	r.mu.RLock()
	c := r.containers[id]
	var running bool
	if c != nil {
		running = c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	r.mu.RUnlock()
	if c == nil {
		return notFound("container", id)
	}
	if !running {
		return nil
	}
	if err := r.b.Stop(ctx, id, grace); err != nil && !runtime.IsNotFound(err) {
		return fmt.Errorf("backend: stop container %s: %w", id, err)
	}
	st, err := r.b.Status(ctx, id)
	if runtime.IsNotFound(err) {
		st, err = Status{ExitCode: 137, Reason: ReasonError}, nil
	}
	if err != nil {
		return fmt.Errorf("backend: stop container %s: %w", id, err)
	}
	if st.Running {
		return fmt.Errorf("backend: stop container %s: the backend reports it still running", id)
	}
	r.exited(id, st)
	return nil
}

// RemoveContainer implements runtime.RuntimeService: a running container
// is killed first. Removing an unknown container succeeds.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	if err := r.enter(); err != nil {
		return err
	}
	if err := r.stop(ctx, containerID, 0); err != nil {
		if runtime.IsNotFound(err) {
			return nil
		}
		return err
	}
	r.mu.RLock()
	c := r.containers[containerID]
	started := c != nil && c.State != runtimeapi.ContainerState_CONTAINER_CREATED
	r.mu.RUnlock()
	if c == nil {
		return nil
	}
	if started {
		if err := r.b.Remove(ctx, containerID); err != nil {
			return fmt.Errorf("backend: remove container %s: %w", containerID, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[containerID] != c {
		return nil
	}
	if err := r.store.remove("containers", c.ID); err != nil {
		return fmt.Errorf("backend: remove container %s: %w", c.ID, err)
	}
	delete(r.containers, c.ID)
	s := r.sandboxes[c.SandboxID]
	if i := slices.Index(s.containers, c); i >= 0 {
		s.containers = slices.Delete(s.containers, i, i+1)
	}
	r.emitLocked(c.ID, s, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

// ListContainers implements runtime.RuntimeService, oldest first. The
// filter's ID matches exactly or as a prefix.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*runtimeapi.Container
	for _, c := range r.containers {
		if !strings.HasPrefix(c.ID, filter.GetId()) ||
			(filter.GetState() != nil && filter.GetState().GetState() != c.State) ||
			(filter.GetPodSandboxId() != "" && filter.GetPodSandboxId() != c.SandboxID) ||
			!matchLabels(c.Config.GetLabels(), filter.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id:           c.ID,
			PodSandboxId: c.SandboxID,
			Metadata:     c.metadata(),
			Image:        c.image(),
			ImageRef:     c.ImageRef,
			ImageId:      c.ImageRef,
			State:        c.State,
			CreatedAt:    c.CreatedAt,
			Labels:       cloneMap(c.Config.GetLabels()),
			Annotations:  cloneMap(c.Config.GetAnnotations()),
		})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int {
		return cmpInt64(a.CreatedAt, b.CreatedAt, a.Id, b.Id)
	})
	return out, nil
}

// ContainerStatus implements runtime.RuntimeService.
func (r *Runtime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := r.containers[containerID]
	if c == nil {
		return nil, notFound("container", containerID)
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: c.status()}
	if verbose && c.PID != 0 {
		resp.Info = map[string]string{"pid": fmt.Sprint(c.PID)}
	}
	return resp, nil
}

// UpdateContainerResources implements runtime.RuntimeService: the
// resources are recorded and shown in the container's status; a Backend
// that implements ResourceUpdater applies them.
func (r *Runtime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	if err := r.enter(); err != nil {
		return err
	}
	r.mu.RLock()
	c := r.containers[containerID]
	r.mu.RUnlock()
	if c == nil {
		return notFound("container", containerID)
	}
	if u, ok := r.b.(ResourceUpdater); ok {
		if err := u.UpdateResources(ctx, containerID, resources.GetLinux()); err != nil {
			return fmt.Errorf("backend: update resources of container %s: %w", containerID, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[containerID] == c {
		c.Resources = cloneResources(resources)
		r.saveLocked(c)
	}
	return nil
}

// ResourceUpdater is an optional capability of a Backend: it changes the
// resources of a container, running or not, for UpdateContainerResources.
// Without it the resources are recorded only.
type ResourceUpdater interface {
	UpdateResources(ctx context.Context, id string, resources *runtimeapi.LinuxContainerResources) error
}

// ExecSync implements runtime.RuntimeService with Backend.Exec. A non-zero
// exit code is a k8s.io/utils/exec.CodeExitError, as the CRI client
// returns; a command still running after timeout is killed and the error
// carries a DeadlineExceeded status, as containerd's.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if err := r.enter(); err != nil {
		return nil, nil, err
	}
	r.mu.RLock()
	c := r.containers[containerID]
	var running bool
	if c != nil {
		running = c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	r.mu.RUnlock()
	if c == nil {
		return nil, nil, notFound("container", containerID)
	}
	if !running {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "backend: exec in container %q: %v", containerID, ErrNotRunning)
	}
	if len(cmd) == 0 {
		return nil, nil, status.Error(codes.InvalidArgument, "backend: exec: empty command")
	}
	ectx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ectx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	code, err := r.b.Exec(ectx, containerID, slices.Clone(cmd), &stdout, &stderr)
	if err != nil {
		if ctx.Err() == nil && ectx.Err() != nil {
			return stdout.Bytes(), stderr.Bytes(), status.Errorf(codes.DeadlineExceeded, "backend: exec in container %s: timeout %s exceeded", containerID, timeout)
		}
		if ctx.Err() != nil {
			return nil, nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, nil, fmt.Errorf("backend: exec in container %s: %w", containerID, err)
	}
	if code != 0 {
		return stdout.Bytes(), stderr.Bytes(), utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr.Bytes()),
			Code: code,
		}
	}
	return stdout.Bytes(), stderr.Bytes(), nil
}

func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func cmpInt64(a, b int64, ida, idb string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return strings.Compare(ida, idb)
}

// command returns the container's command and arguments as a container
// runtime runs them: the config's command, else the image's entrypoint
// (ImageCommander); the config's arguments, else, when the config gives no
// command, the image's Cmd.
func (r *Runtime) command(ctx context.Context, imageRef string, config *runtimeapi.ContainerConfig) (command, args []string, err error) {
	command, args = config.GetCommand(), config.GetArgs()
	if ic, ok := r.b.(ImageCommander); ok && len(command) == 0 {
		entrypoint, cmd, err := ic.ImageCommand(ctx, imageRef)
		if err != nil {
			return nil, nil, fmt.Errorf("backend: image %q of container %q: %w", imageRef, config.GetMetadata().GetName(), err)
		}
		command = entrypoint
		if len(args) == 0 {
			args = cmd
		}
	}
	if len(command)+len(args) == 0 {
		if _, ok := r.b.(ImageCommander); ok {
			return nil, nil, status.Errorf(codes.InvalidArgument, "backend: container %q has no command, and its image neither", config.GetMetadata().GetName())
		}
		return nil, nil, status.Errorf(codes.InvalidArgument, "backend: container %q has no command: this runtime does not read image entrypoints", config.GetMetadata().GetName())
	}
	return command, args, nil
}

// withCommand sets the config's command and arguments.
func withCommand(c *runtimeapi.ContainerConfig, command, args []string) *runtimeapi.ContainerConfig {
	c.Command, c.Args = slices.Clone(command), slices.Clone(args)
	return c
}
