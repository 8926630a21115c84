package runtimetest

import (
	"maps"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is a snapshot of a pod sandbox, for assertions. It is a copy:
// changing it changes nothing in the runtime.
type Sandbox struct {
	ID        string
	Name      string
	Namespace string
	UID       string
	Attempt   uint32
	State     runtimeapi.PodSandboxState
	// IP is empty for a sandbox on the host network.
	IP             string
	HostNetwork    bool
	RuntimeHandler string
	CreatedAt      time.Time
	Labels         map[string]string
	Annotations    map[string]string
	// ContainerIDs of the sandbox's containers, in creation order.
	ContainerIDs []string
}

// Container is a snapshot of a container, for assertions. It is a copy:
// changing it changes nothing in the runtime.
type Container struct {
	ID        string
	SandboxID string
	Name      string
	Attempt   uint32
	Image     string
	// ImageRef is the ID of the image the container was created from.
	ImageRef    string
	Command     []string
	Args        []string
	State       runtimeapi.ContainerState
	ExitCode    int32
	Reason      string
	Message     string
	CreatedAt   time.Time
	StartedAt   time.Time // zero until started
	FinishedAt  time.Time // zero until exited
	Labels      map[string]string
	Annotations map[string]string
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Sandboxes returns a snapshot of every sandbox, in creation order.
func (r *Runtime) Sandboxes() []Sandbox {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Sandbox, 0, len(r.sandboxes))
	for _, s := range r.sandboxList {
		if s.gone {
			continue
		}
		sb := Sandbox{
			ID:             s.id,
			Name:           s.meta.Name,
			Namespace:      s.meta.Namespace,
			UID:            s.meta.Uid,
			Attempt:        s.meta.Attempt,
			State:          s.state,
			IP:             s.ip,
			HostNetwork:    s.hostNetwork,
			RuntimeHandler: s.handler,
			CreatedAt:      nsTime(s.createdAt),
			Labels:         maps.Clone(s.labels),
			Annotations:    maps.Clone(s.annotations),
		}
		for _, c := range s.containers {
			sb.ContainerIDs = append(sb.ContainerIDs, c.id)
		}
		out = append(out, sb)
	}
	return out
}

// Containers returns a snapshot of every container, in creation order.
func (r *Runtime) Containers() []Container {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Container, 0, len(r.containers))
	for _, c := range r.ctrList {
		if c.gone {
			continue
		}
		out = append(out, Container{
			ID:          c.id,
			SandboxID:   c.sb.id,
			Name:        c.meta.Name,
			Attempt:     c.meta.Attempt,
			Image:       c.image.GetImage(),
			ImageRef:    c.imageRef,
			Command:     slices.Clone(c.command),
			Args:        slices.Clone(c.args),
			State:       c.state,
			ExitCode:    c.exitCode,
			Reason:      c.reason,
			Message:     c.message,
			CreatedAt:   nsTime(c.createdAt),
			StartedAt:   nsTime(c.startedAt),
			FinishedAt:  nsTime(c.finishedAt),
			Labels:      maps.Clone(c.labels),
			Annotations: maps.Clone(c.annotations),
		})
	}
	return out
}
