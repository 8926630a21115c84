package runtime

import (
	"context"
	"maps"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LabelAgent is the label that names the agent owning a sandbox or
// container, so that agents sharing one runtime see only their own pods.
const LabelAgent = "io.nodekit.agent"

// Scoped is a RuntimeService that shows one agent's sandboxes and
// containers only. WithIdentity returns one.
type Scoped interface {
	RuntimeService
	// Identity is the value of LabelAgent on the objects it creates and
	// lists.
	Identity() string
	// Unwrap returns the runtime it scopes.
	Unwrap() RuntimeService
}

// WithIdentity returns rs scoped to the agent named identity: every
// sandbox and container it creates carries the label LabelAgent=identity,
// ListPodSandbox and ListContainers (and their WireLister forms) add that
// label to their selector, and, when rs is a ContainerEventStreamer, the
// event stream leaves out the events of other agents' sandboxes. Calls by ID are passed on as they
// are: IDs come from the lists. So every part of an agent built on it
// (relist, housekeeping, orphan removal) sees only its own pods, and two
// agents on one runtime do not touch each other's. Objects created without
// the label (by an agent without an identity, by crictl) are no agent's.
//
// A runtime that is already Scoped is returned as it is, so a caller can
// choose the identity of an agent that would scope its runtime itself. An
// empty identity returns rs unchanged.
func WithIdentity(rs RuntimeService, identity string) RuntimeService {
	if _, ok := rs.(Scoped); ok || identity == "" || rs == nil {
		return rs
	}
	s := &scoped{RuntimeService: rs, id: identity}
	es, events := rs.(ContainerEventStreamer)
	is, images := rs.(ImageService)
	switch {
	case events && images:
		return &struct {
			*scoped
			ImageService
			scopedEvents
		}{s, is, scopedEvents{s: s, es: es}}
	case events:
		return &struct {
			*scoped
			scopedEvents
		}{s, scopedEvents{s: s, es: es}}
	case images:
		return &struct {
			*scoped
			ImageService
		}{s, is}
	}
	return s
}

type scoped struct {
	RuntimeService
	id string
}

func (s *scoped) Identity() string       { return s.id }
func (s *scoped) Unwrap() RuntimeService { return s.RuntimeService }
func (s *scoped) selector(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	maps.Copy(out, m)
	out[LabelAgent] = s.id
	return out
}

func (s *scoped) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if config != nil {
		labels := s.selector(config.Labels)
		config = copySandboxConfig(config)
		config.Labels = labels
	}
	return s.RuntimeService.RunPodSandbox(ctx, config, runtimeHandler)
}

func (s *scoped) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if config != nil {
		labels := s.selector(config.Labels)
		config = copyContainerConfig(config)
		config.Labels = labels
	}
	if sandboxConfig != nil {
		labels := s.selector(sandboxConfig.Labels)
		sandboxConfig = copySandboxConfig(sandboxConfig)
		sandboxConfig.Labels = labels
	}
	return s.RuntimeService.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
}

// copySandboxConfig and copyContainerConfig return a new config with c's
// fields, sharing their values (messages, lists, maps) with c: the
// caller's config stays as it was, and the scoped runtime, which only sets
// the copy's labels, does not pay for a deep copy (proto.Clone) of every
// config, the largest allocation of a pod start, nor for copying field by
// field through protobuf reflection, which cost a pod start more than its
// labels. TestWithIdentityCopiesEveryField fails when the CRI adds a field
// that they do not copy.
func copySandboxConfig(c *runtimeapi.PodSandboxConfig) *runtimeapi.PodSandboxConfig {
	out := &runtimeapi.PodSandboxConfig{
		Metadata:     c.Metadata,
		Hostname:     c.Hostname,
		LogDirectory: c.LogDirectory,
		DnsConfig:    c.DnsConfig,
		PortMappings: c.PortMappings,
		Labels:       c.Labels,
		Annotations:  c.Annotations,
		Linux:        c.Linux,
		Windows:      c.Windows,
	}
	copyUnknown(out, c)
	return out
}

func copyContainerConfig(c *runtimeapi.ContainerConfig) *runtimeapi.ContainerConfig {
	out := &runtimeapi.ContainerConfig{
		Metadata:    c.Metadata,
		Image:       c.Image,
		Command:     c.Command,
		Args:        c.Args,
		WorkingDir:  c.WorkingDir,
		Envs:        c.Envs,
		Mounts:      c.Mounts,
		Devices:     c.Devices,
		Labels:      c.Labels,
		Annotations: c.Annotations,
		LogPath:     c.LogPath,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.Tty,
		Linux:       c.Linux,
		Windows:     c.Windows,
		CDIDevices:  c.CDIDevices,
		StopSignal:  c.StopSignal,
	}
	copyUnknown(out, c)
	return out
}

// copyUnknown gives dst the unknown fields of src (none in a config the
// agent built).
func copyUnknown(dst, src proto.Message) {
	if u := src.ProtoReflect().GetUnknown(); len(u) > 0 {
		dst.ProtoReflect().SetUnknown(u)
	}
}

func (s *scoped) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return s.RuntimeService.ListPodSandbox(ctx, s.sandboxFilter(filter))
}

func (s *scoped) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return s.RuntimeService.ListContainers(ctx, s.containerFilter(filter))
}

// sandboxFilter is filter (nil for none) within the scope.
func (s *scoped) sandboxFilter(filter *runtimeapi.PodSandboxFilter) *runtimeapi.PodSandboxFilter {
	f := &runtimeapi.PodSandboxFilter{}
	if filter != nil {
		f.Id, f.State = filter.Id, filter.State
	}
	f.LabelSelector = s.selector(filter.GetLabelSelector())
	return f
}

// containerFilter is filter (nil for none) within the scope.
func (s *scoped) containerFilter(filter *runtimeapi.ContainerFilter) *runtimeapi.ContainerFilter {
	f := &runtimeapi.ContainerFilter{}
	if filter != nil {
		f.Id, f.State, f.PodSandboxId = filter.Id, filter.State, filter.PodSandboxId
	}
	f.LabelSelector = s.selector(filter.GetLabelSelector())
	return f
}

// ListPodSandboxWire implements WireLister with the scope's selector,
// when the runtime it scopes is a WireLister.
func (s *scoped) ListPodSandboxWire(ctx context.Context, filter *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error) {
	wl, ok := s.RuntimeService.(WireLister)
	if !ok {
		return nil, errNoWireLister(s.RuntimeService)
	}
	return wl.ListPodSandboxWire(ctx, s.sandboxFilter(filter), buf)
}

// ListContainersWire implements WireLister with the scope's selector,
// when the runtime it scopes is a WireLister.
func (s *scoped) ListContainersWire(ctx context.Context, filter *runtimeapi.ContainerFilter, buf []byte) ([]byte, error) {
	wl, ok := s.RuntimeService.(WireLister)
	if !ok {
		return nil, errNoWireLister(s.RuntimeService)
	}
	return wl.ListContainersWire(ctx, s.containerFilter(filter), buf)
}

// scopedEvents filters the event stream of a scoped runtime.
type scopedEvents struct {
	s  *scoped
	es ContainerEventStreamer
}

// GetContainerEvents implements ContainerEventStreamer: the events whose
// sandbox (or, without a sandbox status, whose container) carries another
// identity, or none, are left out; events that say nothing of their owner
// pass. A streamer that filters itself (FilteredEventStreamer) is given
// the filter; another's stream is filtered on a goroutine of its own.
func (e scopedEvents) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if f, ok := e.es.(FilteredEventStreamer); ok {
		return f.GetContainerEventsFiltered(ctx, ch, cb, e.mine)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inner := make(chan *runtimeapi.ContainerEventResponse)
	errc := make(chan error, 1)
	go func() { errc <- e.es.GetContainerEvents(ctx, inner, cb) }()
	for {
		select {
		case ev := <-inner:
			if !e.mine(ev) {
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				cancel()
				return <-errc
			}
		case err := <-errc:
			return err
		}
	}
}

func (e scopedEvents) mine(ev *runtimeapi.ContainerEventResponse) bool {
	if s := ev.GetPodSandboxStatus(); s != nil {
		return s.GetLabels()[LabelAgent] == e.s.id
	}
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() == ev.GetContainerId() {
			return c.GetLabels()[LabelAgent] == e.s.id
		}
	}
	return true
}
