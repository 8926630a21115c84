package volume

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Mount is a volume set up for a pod: what containers bind.
type Mount struct {
	// Name of the volume in the pod spec.
	Name string
	// HostPath is the file or directory on the host that containers mounting
	// the volume bind.
	HostPath string
	// ReadOnly when every mount of the volume must be read-only, whatever
	// the container's volumeMount says.
	ReadOnly bool
}

// SetUpRequest asks a plugin to set up one volume of a pod.
type SetUpRequest struct {
	// Pod is the pod the volume belongs to.
	Pod *v1.Pod
	// Volume is the volume's entry in the pod spec.
	Volume *v1.Volume
	// Dir is the directory the plugin may keep the volume in:
	// <root>/pods/<uid>/volumes/<escaped plugin name>/<volume name>. It does
	// not exist until the plugin creates it; its parents do.
	Dir string
}

// TearDownRequest asks a plugin to release one volume of a pod. The pod
// itself may be unknown: after a restart of the agent, volumes are torn
// down from what is on disk.
type TearDownRequest struct {
	// PodUID is the pod's UID.
	PodUID types.UID
	// Name is the volume's name.
	Name string
	// Dir is the volume's directory, as in SetUpRequest; it may not exist.
	Dir string
}

// Plugin sets up and tears down one kind of volume (hostPath, emptyDir,
// ...). The Manager calls it from several goroutines, but never twice at
// once for the same pod.
type Plugin interface {
	// Name of the plugin, e.g. "kubernetes.io/host-path". The Manager keeps
	// the plugin's volumes under the name with "/" replaced by "~".
	Name() string
	// CanSupport reports whether the plugin handles the volume (usually:
	// whether its source field is set). It does no I/O.
	CanSupport(vol *v1.Volume) bool
	// SetUp makes the volume ready and returns where it is. It must be
	// idempotent: the Manager calls it again after a restart of the agent,
	// when the volume may already be set up, and must get the same Mount.
	SetUp(ctx context.Context, req SetUpRequest) (Mount, error)
	// TearDown releases what SetUp made, including req.Dir if the plugin
	// created it. It must be idempotent, and succeed for a volume that was
	// never set up.
	TearDown(ctx context.Context, req TearDownRequest) error
}

// Funcs is a Plugin made of functions: for small plugins and tests.
type Funcs struct {
	// PluginName is returned by Name.
	PluginName string
	// CanSupportFunc implements CanSupport; nil supports no volume.
	CanSupportFunc func(vol *v1.Volume) bool
	// SetUpFunc implements SetUp; nil fails every SetUp.
	SetUpFunc func(ctx context.Context, req SetUpRequest) (Mount, error)
	// TearDownFunc implements TearDown; nil does nothing.
	TearDownFunc func(ctx context.Context, req TearDownRequest) error
}

var _ Plugin = Funcs{}

// Name returns f.PluginName.
func (f Funcs) Name() string { return f.PluginName }

// CanSupport calls f.CanSupportFunc.
func (f Funcs) CanSupport(vol *v1.Volume) bool {
	return f.CanSupportFunc != nil && f.CanSupportFunc(vol)
}

// SetUp calls f.SetUpFunc.
func (f Funcs) SetUp(ctx context.Context, req SetUpRequest) (Mount, error) {
	if f.SetUpFunc == nil {
		return Mount{}, fmt.Errorf("volume: plugin %s cannot set up volumes", f.PluginName)
	}
	return f.SetUpFunc(ctx, req)
}

// TearDown calls f.TearDownFunc.
func (f Funcs) TearDown(ctx context.Context, req TearDownRequest) error {
	if f.TearDownFunc == nil {
		return nil
	}
	return f.TearDownFunc(ctx, req)
}

// The classes of errors that retrying does not cure. A pod whose volume
// fails with one of them cannot start until its spec or the agent's
// configuration changes, so WaitForPodVolumes returns at once rather than
// waiting for its timeout.
var (
	// ErrNoPlugin: no plugin handles the volume's source.
	ErrNoPlugin = errors.New("no volume plugin")
	// ErrNotAllowed: the agent's configuration forbids what the volume
	// asks for (a host path outside the allowed ones, a writable mount of
	// a read-only one, a subPath leaving its volume).
	ErrNotAllowed = errors.New("not allowed")
	// ErrInvalid: the pod spec is wrong (a relative or ".." host path, an
	// unknown hostPath type, an absolute subPath, Bidirectional propagation
	// in an unprivileged container, ...).
	ErrInvalid = errors.New("invalid volume")
)

// ErrPodDirectory marks the failure to create a pod's directories (a full
// or read-only disk under the root directory): WaitForPodVolumes returns
// it at once rather than waiting for its timeout, so that the pod's status
// says why it does not start, though retrying may cure it. The kubelet
// reports it with the event reason ReasonFailedToMakePodDataDirectories.
var ErrPodDirectory = errors.New("cannot create the pod directory")

// ReasonFailedToMakePodDataDirectories is the kubelet's event reason for a
// pod whose directories could not be created.
const ReasonFailedToMakePodDataDirectories = "FailedToMakePodDataDirectories"

// IsPermanent reports whether err is of a class that retrying does not
// cure: ErrNoPlugin, ErrNotAllowed or ErrInvalid.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrNoPlugin) || errors.Is(err, ErrNotAllowed) || errors.Is(err, ErrInvalid)
}

// ReasonFailedMount is the kubelet's event reason for a pod whose volumes
// could not be set up ("FailedMount"), for agents that report it.
const ReasonFailedMount = "FailedMount"

// SourceKind names the kind of a volume's source, as the API's field:
// "hostPath", "emptyDir", "configMap", ...; "" when none is set.
func SourceKind(vol *v1.Volume) string {
	s := &vol.VolumeSource
	switch {
	case s.HostPath != nil:
		return "hostPath"
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.ConfigMap != nil:
		return "configMap"
	case s.Secret != nil:
		return "secret"
	case s.DownwardAPI != nil:
		return "downwardAPI"
	case s.Projected != nil:
		return "projected"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.Ephemeral != nil:
		return "ephemeral"
	case s.CSI != nil:
		return "csi"
	case s.Image != nil:
		return "image"
	case s.NFS != nil:
		return "nfs"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	case s.Glusterfs != nil:
		return "glusterfs"
	case s.RBD != nil:
		return "rbd"
	case s.CephFS != nil:
		return "cephfs"
	case s.GitRepo != nil:
		return "gitRepo"
	case s.AWSElasticBlockStore != nil:
		return "awsElasticBlockStore"
	case s.GCEPersistentDisk != nil:
		return "gcePersistentDisk"
	case s.AzureDisk != nil:
		return "azureDisk"
	case s.AzureFile != nil:
		return "azureFile"
	case s.FlexVolume != nil:
		return "flexVolume"
	case s.Cinder != nil:
		return "cinder"
	case s.Flocker != nil:
		return "flocker"
	case s.VsphereVolume != nil:
		return "vsphereVolume"
	case s.Quobyte != nil:
		return "quobyte"
	case s.PhotonPersistentDisk != nil:
		return "photonPersistentDisk"
	case s.PortworxVolume != nil:
		return "portworxVolume"
	case s.ScaleIO != nil:
		return "scaleIO"
	case s.StorageOS != nil:
		return "storageos"
	}
	return ""
}

// Mark returns err as a member of class (ErrNotAllowed, ErrInvalid, ...):
// errors.Is(result, class) holds, errors.Is(result, x) for anything err
// wraps too, and the message is err's alone.
func Mark(err, class error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: class}
}

type markedError struct{ err, class error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.class} }

// Refresher is a Plugin whose volumes follow a source that changes
// (configMap, secret, downwardAPI, projected): the Manager calls SetUp
// again, with the latest pod and the same directory, every
// Options.RefreshPeriod and when the pod changes. SetUp must then update
// the content in place (atomically) and return the same mount. A failed
// refresh leaves the volume set up as it was.
type Refresher interface {
	Plugin
	RequiresRefresh(vol *v1.Volume) bool
}
