package runtime

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
func (m *Manager) PodStatusFromEvent(prev *PodStatus, ev *runtimeapi.ContainerEventResponse) (*PodStatus, bool) {
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
		prev = &PodStatus{}
	}
	if len(events) == 0 && slices.ContainsFunc(prev.ContainerStatuses, func(c *ContainerStatus) bool { return c.SandboxID == sb.GetId() }) {
		return nil, false
	}
	uid := types.UID(cmp.Or(sb.GetLabels()[LabelPodUID], sb.GetMetadata().GetUid()))
	ps := &PodStatus{ID: uid, Name: sb.GetMetadata().GetName(), Namespace: sb.GetMetadata().GetNamespace(), TimeStamp: time.Unix(0, ev.GetCreatedAt())}
	if prev.ID != "" {
		ps.ID, ps.Name, ps.Namespace = prev.ID, cmp.Or(prev.Name, ps.Name), cmp.Or(prev.Namespace, ps.Namespace)
	}

	ps.SandboxStatuses = make([]*runtimeapi.PodSandboxStatus, 0, len(prev.SandboxStatuses)+1)
	for _, s := range prev.SandboxStatuses {
		if s.GetId() != sb.GetId() {
			ps.SandboxStatuses = append(ps.SandboxStatuses, s)
		}
	}
	ps.SandboxStatuses = append(ps.SandboxStatuses, compactSandboxStatus(sb, ps))
	slices.SortFunc(ps.SandboxStatuses, func(a, b *runtimeapi.PodSandboxStatus) int {
		return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()),
			cmp.Compare(b.GetMetadata().GetAttempt(), a.GetMetadata().GetAttempt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	if newest := ps.SandboxStatuses[0]; newest.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		ps.IPs = sandboxIPs(newest)
	}

	ps.ContainerStatuses = make([]*ContainerStatus, 0, len(prev.ContainerStatuses)+len(events))
	for _, c := range prev.ContainerStatuses {
		if c.SandboxID != sb.GetId() {
			ps.ContainerStatuses = append(ps.ContainerStatuses, c)
		}
	}
	for _, st := range events {
		cs := convertContainerStatus(&runtimeapi.Container{Id: st.GetId(), PodSandboxId: sb.GetId()}, st, ps)
		if cs.State == ContainerStateExited {
			if msg := m.terminationMessage(ps.ID, st); msg != "" {
				if cs.Message != "" {
					cs.Message += ": "
				}
				cs.Message += msg
			}
		}
		ps.ContainerStatuses = append(ps.ContainerStatuses, cs)
	}
	slices.SortStableFunc(ps.ContainerStatuses, func(a, b *ContainerStatus) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.RestartCount, a.RestartCount), cmp.Compare(a.ID, b.ID))
	})
	return ps, true
}
