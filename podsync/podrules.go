package podsync

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podruntime"
)

// startedFromStatus reports a running container's Started flag as the API
// status shows it (the probes set it: the startup probe succeeded, or the
// container has none), found by the container ID without its
// "<runtime>://" prefix. A container the status does not show yet counts
// as not started.
func startedFromStatus(s v1.PodStatus) podruntime.StartedFunc {
	started := map[string]bool{}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running == nil || cs.ContainerID == "" {
				continue
			}
			id, _ := podmodel.RuntimeContainerID(cs.ContainerID)
			started[id] = cs.Started != nil && *cs.Started
		}
	}
	return func(id string) bool { return started[id] }
}
