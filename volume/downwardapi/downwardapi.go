package downwardapi

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/projection"
)

// PluginName is the plugin's name, the kubelet's; its volumes live in
// <root>/pods/<uid>/volumes/kubernetes.io~downward-api/<name>.
const PluginName = "kubernetes.io/downward-api"

// Options configure the downwardAPI plugin.
type Options struct {
	// NodeAllocatable returns the node's allocatable resources: a
	// container's cpu, memory or ephemeral-storage limit that is not set
	// reads as the node's allocatable amount, as in the kubelet. It is
	// called at each SetUp of a volume with a resourceFieldRef. Defaults
	// to none: such a limit reads as 0.
	NodeAllocatable func() v1.ResourceList
	// NoTmpfs keeps the volumes on disk instead of a tmpfs of their own.
	// An agent that is not root, or may not mount, keeps them on disk
	// anyway, and logs it once. Defaults to false: a tmpfs, as the
	// kubelet.
	NoTmpfs bool
	// Logger receives content updates (V(1)) and the fall-back to disk.
	// Defaults to discarding.
	Logger logr.Logger
}

// Plugin sets up downwardAPI volumes. It is safe for concurrent use.
type Plugin struct {
	allocatable func() v1.ResourceList
	dirs        *projection.Dirs
}

var _ volume.Plugin = (*Plugin)(nil)

// New returns the downwardAPI plugin.
func New(opts Options) *Plugin {
	return &Plugin{allocatable: opts.NodeAllocatable, dirs: &projection.Dirs{
		Plugin:  "downwardapi",
		Memory:  true,
		NoTmpfs: opts.NoTmpfs,
		Log:     opts.Logger.WithName("downwardapi"),
	}}
}

// Name returns PluginName.
func (p *Plugin) Name() string { return PluginName }

// CanSupport reports whether vol is a downwardAPI volume.
func (p *Plugin) CanSupport(vol *v1.Volume) bool { return vol.DownwardAPI != nil }

// RequiresRefresh reports whether the volume manager should call SetUp
// again for a volume already set up, with the pod's latest version: true
// for every downwardAPI volume, whose labels, annotations and status
// fields may change (the kubelet's RequiresRemount).
func (p *Plugin) RequiresRefresh(vol *v1.Volume) bool { return vol.DownwardAPI != nil }

// SetUp writes the values of the volume's items, taken from req.Pod, into
// req.Dir, on a tmpfs, with the atomic writer; when they are already there
// it writes nothing.
func (p *Plugin) SetUp(_ context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	src := req.Volume.DownwardAPI
	if src == nil {
		return volume.Mount{}, p.dirs.Errorf(req.Volume.Name, volume.Mark(errors.New("not a downwardAPI volume"), volume.ErrInvalid))
	}
	files, err := projection.DownwardAPIFiles(src.Items, req.Pod, src.DefaultMode, p.nodeAllocatable(src.Items))
	if err != nil {
		return volume.Mount{}, p.dirs.Errorf(req.Volume.Name, err)
	}
	return p.dirs.Write(req, files)
}

// nodeAllocatable calls NodeAllocatable when an item needs it.
func (p *Plugin) nodeAllocatable(items []v1.DownwardAPIVolumeFile) v1.ResourceList {
	if p.allocatable == nil {
		return nil
	}
	for _, it := range items {
		if it.ResourceFieldRef != nil {
			return p.allocatable()
		}
	}
	return nil
}

// TearDown unmounts the volume's tmpfs and removes its directory.
func (p *Plugin) TearDown(_ context.Context, req volume.TearDownRequest) error {
	return p.dirs.TearDown(req)
}
