package runtimetest

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandbox is the runtime's record of a pod sandbox. Its fields change only
// under Runtime.mu; list and status are immutable views rebuilt by publish
// after every change.
type sandbox struct {
	id          string
	meta        *runtimeapi.PodSandboxMetadata
	labels      map[string]string
	annotations map[string]string
	handler     string
	nsOptions   *runtimeapi.NamespaceOption
	hostNetwork bool
	ipNum       uint32
	ip          string
	state       runtimeapi.PodSandboxState
	createdAt   int64
	containers  []*container // creation order
	gone        bool

	list   *runtimeapi.PodSandbox
	status *runtimeapi.PodSandboxStatus
}

func (s *sandbox) publish() {
	s.list = &runtimeapi.PodSandbox{
		Id:             s.id,
		Metadata:       s.meta,
		State:          s.state,
		CreatedAt:      s.createdAt,
		Labels:         s.labels,
		Annotations:    s.annotations,
		RuntimeHandler: s.handler,
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:             s.id,
		Metadata:       s.meta,
		State:          s.state,
		CreatedAt:      s.createdAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip},
		Labels:         s.labels,
		Annotations:    s.annotations,
		RuntimeHandler: s.handler,
	}
	if s.nsOptions != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{
			Namespaces: &runtimeapi.Namespace{Options: s.nsOptions},
		}
	}
	s.status = st
}

// RunPodSandbox implements runtime.RuntimeService: the sandbox is ready at
// once, with an address from 10.88.0.0/16 unless it uses the host network.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if err := r.enter(ctx, "RunPodSandbox"); err != nil {
		return "", err
	}
	defer r.waitEvents(ctx)
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "runtimetest: sandbox config has no metadata")
	}
	s := &sandbox{
		meta: &runtimeapi.PodSandboxMetadata{
			Name:      config.Metadata.Name,
			Uid:       config.Metadata.Uid,
			Namespace: config.Metadata.Namespace,
			Attempt:   config.Metadata.Attempt,
		},
		labels:      cloneLabels(config.Labels),
		annotations: cloneLabels(config.Annotations),
		handler:     runtimeHandler,
		state:       runtimeapi.PodSandboxState_SANDBOX_READY,
	}
	if ns := config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		s.nsOptions = &runtimeapi.NamespaceOption{
			Network:  ns.Network,
			Pid:      ns.Pid,
			Ipc:      ns.Ipc,
			TargetId: ns.TargetId,
		}
		s.hostNetwork = ns.Network == runtimeapi.NamespaceMode_NODE
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if !s.hostNetwork {
		n, err := r.ips.get()
		if err != nil {
			return "", status.Error(codes.ResourceExhausted, err.Error())
		}
		s.ipNum, s.ip = n, ipString(n)
	}
	s.id = r.newIDLocked()
	s.createdAt = now()
	s.publish()
	r.sandboxes[s.id] = s
	r.sandboxList = append(r.sandboxList, s)
	indexAdd(r.sandboxesByPod, s.labels[podUIDLabel], s)
	r.emitLocked(s.id, s, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.emitLocked(s.id, s, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return s.id, nil
}

// StopPodSandbox implements runtime.RuntimeService: its running containers
// are killed (exit code 137) and it becomes not ready. Stopping a stopped
// sandbox does nothing.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	if err := r.enter(ctx, "StopPodSandbox"); err != nil {
		return err
	}
	defer r.waitEvents(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return notFound("sandbox", podSandboxID)
	}
	r.stopSandboxLocked(s)
	return nil
}

func (r *Runtime) stopSandboxLocked(s *sandbox) {
	for _, c := range s.containers {
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exitLocked(c, exitKilled, reasonError, "")
		}
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		s.publish()
		r.emitLocked(s.id, s, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
}

// RemovePodSandbox implements runtime.RuntimeService: the sandbox is
// stopped, then it and its containers are removed. Removing a sandbox that
// does not exist succeeds, as the CRI requires.
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	if err := r.enter(ctx, "RemovePodSandbox"); err != nil {
		return err
	}
	defer r.waitEvents(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return nil
	}
	r.stopSandboxLocked(s)
	for len(s.containers) > 0 {
		r.removeContainerLocked(s.containers[len(s.containers)-1])
	}
	delete(r.sandboxes, s.id)
	indexRemove(r.sandboxesByPod, s.labels[podUIDLabel], s)
	s.gone = true
	r.sandboxGone++
	r.sandboxList = compact(r.sandboxList, &r.sandboxGone, func(s *sandbox) bool { return s.gone })
	r.ips.put(s.ipNum)
	r.shrinkLocked()
	r.emitLocked(s.id, s, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

// PodSandboxStatus implements runtime.RuntimeService.
func (r *Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := r.enter(ctx, "PodSandboxStatus"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.sandboxes[podSandboxID]
	if !ok {
		return nil, notFound("sandbox", podSandboxID)
	}
	// The statuses of the sandbox's containers are left out, as
	// containerd leaves them out: they are the optional part of the
	// answer (CRI-O fills them in for the kubelet's evented PLEG), and
	// would cost every status read their encoding and decoding.
	return &runtimeapi.PodSandboxStatusResponse{Status: s.status}, nil
}

// ListPodSandbox implements runtime.RuntimeService, in creation order. The
// filter's ID matches exactly or as a prefix.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := r.enter(ctx, "ListPodSandbox"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if filter == nil || (filter.Id == "" && filter.State == nil && len(filter.LabelSelector) == 0) {
		out := make([]*runtimeapi.PodSandbox, 0, len(r.sandboxes))
		for _, s := range r.sandboxList {
			if !s.gone {
				out = append(out, s.list)
			}
		}
		return out, nil
	}
	match := func(s *sandbox) bool {
		if filter.State != nil && s.state != filter.State.State {
			return false
		}
		return matchLabels(s.labels, filter.LabelSelector)
	}
	if filter.Id != "" {
		if s, ok := r.sandboxes[filter.Id]; ok {
			if match(s) {
				return []*runtimeapi.PodSandbox{s.list}, nil
			}
			return nil, nil
		}
	}
	candidates := r.sandboxList
	if uid, ok := filter.LabelSelector[podUIDLabel]; ok {
		candidates = r.sandboxesByPod[uid]
	}
	var out []*runtimeapi.PodSandbox
	for _, s := range candidates {
		if s.gone || !strings.HasPrefix(s.id, filter.Id) || !match(s) {
			continue
		}
		out = append(out, s.list)
	}
	return out, nil
}

// compact drops removed entries from an ordered list once they are at
// least half of it, keeping the cost of removals amortised O(1).
func compact[T any](list []T, gone *int, isGone func(T) bool) []T {
	if *gone < 16 || *gone*2 < len(list) {
		return list
	}
	out := list[:0]
	for _, x := range list {
		if !isGone(x) {
			out = append(out, x)
		}
	}
	clear(list[len(out):])
	*gone = 0
	return out
}
