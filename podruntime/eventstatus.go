package podruntime

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// PodStatusFromEvent returns the pod's status after a container event,
// without a call to the runtime, when the event carries its sandbox's
// status and the statuses of every container of that sandbox (CRI asks
// runtimes to send them; containerd 2.x, runtimetest and package backend
// do): prev, the pod's status before the event (nil for a pod not seen
// yet), with that sandbox and its containers replaced by the event's.
// Other sandboxes of the pod and their containers are kept from prev:
// they did not change, or their own events say so.
//
// It returns false, and the pod must be read with GetPodStatus, for a
// DELETED event, an event without a sandbox status, and an event whose
// container statuses look incomplete (the event's container missing, or
// none at all where prev knew some: containerd sends an event without them
// when it cannot read them).
//
// The kubelet's evented PLEG builds the status from the event alone
// (GeneratePodStatus), which drops the pod's other sandboxes and their
// containers; nodekit keeps them, as a read with GetPodStatus would.
func (m *Manager) PodStatusFromEvent(prev *runtime.PodStatus, ev *runtimeapi.ContainerEventResponse) (*runtime.PodStatus, bool) {
	sb := ev.GetPodSandboxStatus()
	if ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT ||
		sb.GetId() == "" || sb.GetMetadata() == nil {
		return nil, false
	}
	events := ev.GetContainersStatuses()
	if id := ev.GetContainerId(); id != sb.GetId() && !slices.ContainsFunc(events, func(s *runtimeapi.ContainerStatus) bool { return s.GetId() == id }) {
		return nil, false
	}
	if prev == nil {
		prev = &runtime.PodStatus{}
	}
	if len(events) == 0 && slices.ContainsFunc(prev.ContainerStatuses, func(c *runtime.ContainerStatus) bool { return c.SandboxID == sb.GetId() }) {
		return nil, false
	}
	uid := types.UID(cmp.Or(sb.GetLabels()[runtime.LabelPodUID], sb.GetMetadata().GetUid()))
	ps := &runtime.PodStatus{ID: uid, Name: sb.GetMetadata().GetName(), Namespace: sb.GetMetadata().GetNamespace(), TimeStamp: time.Unix(0, ev.GetCreatedAt())}
	if prev.ID != "" {
		ps.ID, ps.Name, ps.Namespace = prev.ID, cmp.Or(prev.Name, ps.Name), cmp.Or(prev.Namespace, ps.Namespace)
	}

	// The other sandboxes and their containers are kept; the event's
	// sandbox and its containers replace those prev had.
	ps.SandboxStatuses = slices.Clone(prev.SandboxStatuses)
	ps.AddSandboxStatus(sb)
	ps.ContainerStatuses = make([]*runtime.ContainerStatus, 0, len(prev.ContainerStatuses)+len(events))
	for _, c := range prev.ContainerStatuses {
		if c.SandboxID != sb.GetId() {
			ps.ContainerStatuses = append(ps.ContainerStatuses, c)
		}
	}
	for _, st := range events {
		m.addContainerStatus(ps, &runtimeapi.Container{Id: st.GetId(), PodSandboxId: sb.GetId()}, st)
	}
	return ps, true
}
