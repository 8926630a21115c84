package probe

import "k8s.io/apimachinery/pkg/types"

// Result is the outcome of a probe.
type Result int

// The probe results.
const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// Update is a change of a container's probe result.
type Update struct {
	ContainerID string
	Result      Result
	PodUID      types.UID
}
