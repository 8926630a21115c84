package volume

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Mount is a prepared volume, ready to be mounted into containers.
type Mount struct {
	// Name of the volume in the pod spec.
	Name string
	// HostPath is the path on the host to bind into containers.
	HostPath string
	// ReadOnly when the volume itself is read-only.
	ReadOnly bool
}

// Plugin sets up and tears down one kind of volume.
type Plugin interface {
	// Name of the plugin, e.g. "kubernetes.io/host-path".
	Name() string
	// CanSupport reports whether the plugin handles this volume source.
	CanSupport(spec *v1.Volume) bool
	// SetUp prepares the volume for the pod and returns where it is.
	SetUp(ctx context.Context, pod *v1.Pod, spec *v1.Volume) (Mount, error)
	// TearDown releases what SetUp prepared.
	TearDown(ctx context.Context, podUID types.UID, name string) error
}

// Manager keeps the volumes of the pods that should run set up.
type Manager interface {
	// WaitForPodVolumes blocks until every volume of the pod is set up (or
	// ctx ends) and returns them by name.
	WaitForPodVolumes(ctx context.Context, pod *v1.Pod) (map[string]Mount, error)
	// ReleasePod tears down the pod's volumes after it terminated.
	ReleasePod(ctx context.Context, uid types.UID) error
}
