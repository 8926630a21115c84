package pleg

import (
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// plegState is a container's state as the PLEG compares it: the runtime's
// states, with created folded into unknown (nothing acts on it), plus
// non-existent for a container the runtime no longer lists.
type plegState uint8

const (
	stateNonExistent plegState = iota
	stateRunning
	stateExited
	stateUnknown
)

func (s plegState) String() string {
	switch s {
	case stateRunning:
		return "running"
	case stateExited:
		return "exited"
	case stateUnknown:
		return "unknown"
	default:
		return "non-existent"
	}
}

// containerState converts a CRI container state.
func containerState(s runtimeapi.ContainerState) plegState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return stateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return stateExited
	default: // created, unknown, and states this version does not know
		return stateUnknown
	}
}

// sandboxState converts a CRI sandbox state: a ready sandbox counts as a
// running container, any other as an exited one, as in the kubelet.
func sandboxState(s runtimeapi.PodSandboxState) plegState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return stateRunning
	}
	return stateExited
}

// appendEvents appends to dst the events of container cid of pod uid
// moving from state old to state cur, the kubelet's generateEvents table:
// nothing if the state is the same; ContainerStarted, ContainerDied or
// ContainerChanged for running, exited or unknown; for a container that
// disappeared, ContainerRemoved, preceded by ContainerDied unless its death
// was already reported.
func appendEvents(dst []*Event, uid types.UID, cid string, old, cur plegState) []*Event {
	if old == cur {
		return dst
	}
	switch cur {
	case stateRunning:
		return append(dst, &Event{ID: uid, Type: ContainerStarted, Data: cid})
	case stateExited:
		return append(dst, &Event{ID: uid, Type: ContainerDied, Data: cid})
	case stateUnknown:
		return append(dst, &Event{ID: uid, Type: ContainerChanged, Data: cid})
	default: // non-existent
		if old == stateExited {
			return append(dst, &Event{ID: uid, Type: ContainerRemoved, Data: cid})
		}
		return append(dst,
			&Event{ID: uid, Type: ContainerDied, Data: cid},
			&Event{ID: uid, Type: ContainerRemoved, Data: cid})
	}
}
