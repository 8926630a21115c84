package probe

import "k8s.io/apimachinery/pkg/types"

// Result is the outcome of a probe.
type Result int

// The probe results.
const (
	Unknown Result = iota
	Success
	Failure
	// Warning is a success with a warning, the kubelet's probe.Warning:
	// an HTTP probe whose redirect to another host was not followed. A
	// Prober returns it; the Manager's workers count it as a Success and
	// record a ProbeWarning event with the probe's message. It is never
	// published as a result.
	Warning
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	case Warning:
		return "Warning"
	}
	return "Unknown"
}

// Update is a change of a container's probe result.
type Update struct {
	ContainerID string
	Result      Result
	PodUID      types.UID
}
