package runtime

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime's view of pods, built from CRI answers: what a pod runtime
// (package podruntime) reads from a RuntimeService, and a PLEG from a
// container event.

// PodsFromCRI groups the listed sandboxes and containers into pods by
// their LabelPodUID (objects without it are not nodekit's and are left
// out). Pods come sorted by UID, sandboxes and containers newest first.
func PodsFromCRI(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) []*Pod {
	pods := map[types.UID]*Pod{}
	pod := func(labels map[string]string) *Pod {
		uid := types.UID(labels[LabelPodUID])
		if uid == "" {
			return nil
		}
		p := pods[uid]
		if p == nil {
			p = &Pod{ID: uid}
			pods[uid] = p
		}
		if p.Name == "" {
			p.Name = labels[LabelPodName]
			p.Namespace = labels[LabelPodNamespace]
		}
		return p
	}
	for _, s := range sandboxes {
		p := pod(s.GetLabels())
		if p == nil {
			continue
		}
		p.Sandboxes = append(p.Sandboxes, &Container{
			ID:        s.GetId(),
			Name:      s.GetMetadata().GetName(),
			State:     sandboxState(s.GetState()),
			CreatedAt: s.GetCreatedAt(),
		})
	}
	for _, c := range containers {
		p := pod(c.GetLabels())
		if p == nil {
			continue
		}
		p.Containers = append(p.Containers, &Container{
			ID:        c.GetId(),
			Name:      containerName(c.GetLabels(), c.GetMetadata()),
			Image:     imageName(c.GetImage()),
			Hash:      c.GetLabels()[LabelContainerHash],
			State:     StateFromCRI(c.GetState()),
			CreatedAt: c.GetCreatedAt(),
		})
	}
	out := make([]*Pod, 0, len(pods))
	newest := func(a, b *Container) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(a.ID, b.ID))
	}
	for _, p := range pods {
		slices.SortFunc(p.Sandboxes, newest)
		slices.SortFunc(p.Containers, newest)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Pod) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// RunningPod returns the pod of status as KillPod takes it: its running and
// unknown-state containers and all its sandboxes (the kubelet's
// ConvertPodStatusToRunningPod).
func RunningPod(status *PodStatus) *Pod {
	p := &Pod{ID: status.ID, Name: status.Name, Namespace: status.Namespace}
	for _, cs := range status.ContainerStatuses {
		if cs.State != ContainerStateRunning && cs.State != ContainerStateUnknown {
			continue
		}
		p.Containers = append(p.Containers, &Container{
			ID: cs.ID, Name: cs.Name, Image: cs.Image, Hash: cs.Hash, State: cs.State, CreatedAt: cs.CreatedAt.UnixNano(),
		})
	}
	for _, s := range status.SandboxStatuses {
		p.Sandboxes = append(p.Sandboxes, &Container{
			ID: s.GetId(), Name: s.GetMetadata().GetName(), State: sandboxState(s.GetState()), CreatedAt: s.GetCreatedAt(),
		})
	}
	return p
}

func sandboxState(s runtimeapi.PodSandboxState) ContainerState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return ContainerStateRunning
	}
	return ContainerStateExited
}

func containerName(labels map[string]string, md *runtimeapi.ContainerMetadata) string {
	if n := labels[LabelContainerName]; n != "" {
		return n
	}
	return md.GetName()
}

func imageName(spec *runtimeapi.ImageSpec) string {
	if u := spec.GetUserSpecifiedImage(); u != "" {
		return u
	}
	return spec.GetImage()
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// SandboxIPs returns the sandbox's IPs, primary first.
func SandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	n := s.GetNetwork()
	if n == nil {
		return nil
	}
	var ips []string
	if n.GetIp() != "" {
		ips = append(ips, n.GetIp())
	}
	for _, ip := range n.GetAdditionalIps() {
		if ip.GetIp() != "" {
			ips = append(ips, ip.GetIp())
		}
	}
	return ips
}

// AddSandboxStatus adds to s a compact copy of the status of one of its
// sandboxes (see SandboxStatuses), keeping them newest first (by creation
// time, then attempt, then ID), and sets s.IPs from the newest sandbox when
// it is ready. A status of the same ID as one s holds replaces it.
func (s *PodStatus) AddSandboxStatus(st *runtimeapi.PodSandboxStatus) {
	s.SandboxStatuses = slices.DeleteFunc(s.SandboxStatuses, func(o *runtimeapi.PodSandboxStatus) bool { return o.GetId() == st.GetId() })
	c := compactSandboxStatus(st, s)
	i, _ := slices.BinarySearchFunc(s.SandboxStatuses, c, func(a, b *runtimeapi.PodSandboxStatus) int {
		return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()),
			cmp.Compare(b.GetMetadata().GetAttempt(), a.GetMetadata().GetAttempt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	s.SandboxStatuses = slices.Insert(s.SandboxStatuses, i, c)
	s.IPs = nil
	if newest := s.SandboxStatuses[0]; newest.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		s.IPs = SandboxIPs(newest)
	}
}

// AddContainerStatus adds to s the status of one of its containers,
// converted from the runtime's status st of the listed container c (its
// ID, sandbox ID, and the labels and annotations st lacks), and returns
// it. The container statuses stay newest first (by creation time, then
// restart count, then ID). terminationMessage, when not "", is the
// message of an exited container, appended to the runtime's. Add the
// sandboxes first: the status shares their strings.
func (s *PodStatus) AddContainerStatus(c *runtimeapi.Container, st *runtimeapi.ContainerStatus, terminationMessage string) *ContainerStatus {
	cs := convertContainerStatus(c, st, s, terminationMessage)
	newer := func(a, b *ContainerStatus) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.RestartCount, a.RestartCount), cmp.Compare(a.ID, b.ID))
	}
	i, _ := slices.BinarySearchFunc(s.ContainerStatuses, cs, newer)
	for i < len(s.ContainerStatuses) && newer(s.ContainerStatuses[i], cs) == 0 {
		i++ // after its equals, as a stable sort keeps them
	}
	s.ContainerStatuses = slices.Insert(s.ContainerStatuses, i, cs)
	return cs
}

// convertContainerStatus converts the runtime's status of the container c
// of the pod whose status is ps, its sandboxes already read, with
// terminationMessage appended to the runtime's message.
func convertContainerStatus(c *runtimeapi.Container, st *runtimeapi.ContainerStatus, ps *PodStatus, terminationMessage string) *ContainerStatus {
	labels := st.GetLabels()
	if len(labels) == 0 {
		labels = c.GetLabels()
	}
	annotations := st.GetAnnotations()
	if len(annotations) == 0 {
		annotations = c.GetAnnotations()
	}
	restarts, _ := strconv.Atoi(annotations[AnnotationRestartCount])
	cs := &ContainerStatus{
		ID:           st.GetId(),
		Name:         containerName(labels, st.GetMetadata()),
		State:        StateFromCRI(st.GetState()),
		CreatedAt:    nsTime(st.GetCreatedAt()),
		StartedAt:    nsTime(st.GetStartedAt()),
		FinishedAt:   nsTime(st.GetFinishedAt()),
		ExitCode:     st.GetExitCode(),
		Image:        imageName(st.GetImage()),
		ImageRef:     st.GetImageRef(),
		Hash:         labels[LabelContainerHash],
		RestartCount: restarts,
		Reason:       st.GetReason(),
		Message:      st.GetMessage(),
		Resources:    containerResourcesFromCRI(st.GetResources()),
	}
	if cs.ID == "" {
		cs.ID = c.GetId()
	}
	if terminationMessage != "" {
		if cs.Message != "" {
			cs.Message += ": "
		}
		cs.Message += terminationMessage
	}
	cs.SandboxID = c.GetPodSandboxId()
	// The strings a cache keeps for every pod: the sandbox's ID is the
	// string of the pod's sandbox status, the name, image, image
	// reference and spec hash are shared with the other pods (the
	// replicas of one template have the same; see shared), and the rest
	// take one allocation, rather than one each in the runtime's answer
	// (see compactSandboxStatus).
	sandboxID := &cs.SandboxID
	for _, sb := range ps.SandboxStatuses {
		if sb.GetId() == cs.SandboxID {
			cs.SandboxID, sandboxID = sb.GetId(), nil
			break
		}
	}
	cs.Name, cs.Image, cs.ImageRef, cs.Hash = shared(cs.Name), shared(cs.Image), shared(cs.ImageRef), shared(cs.Hash)
	if sandboxID != nil {
		packStrings(&cs.ID, sandboxID, &cs.Reason, &cs.Message)
	} else {
		packStrings(&cs.ID, &cs.Reason, &cs.Message)
	}
	return cs
}
