package objectvolume

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/projection"
)

// Kind is what sets one kind of object volume apart; G is the interface
// that gets its objects.
type Kind[G any] struct {
	// Name is the plugin's name: "kubernetes.io/configmap".
	Name string
	// Package starts the plugin's errors and names its logger:
	// "configmap".
	Package string
	// Source names the volume source and its object in errors:
	// "configMap".
	Source string
	// Memory puts each volume on a tmpfs of its own (secrets), unless
	// Options.NoTmpfs is set or the agent cannot mount.
	Memory bool
	// Volume returns vol's source when it is of this kind; ok is false
	// otherwise. It does no I/O.
	Volume func(vol *v1.Volume) (src Source, ok bool)
	// Keys reads the keys of the object name through get
	// (projection.ConfigMapKeys: data and binaryData; projection.SecretKeys:
	// data).
	Keys func(get G, name string) func(ctx context.Context, namespace string) (map[string][]byte, bool, error)
}

// Source is a volume's source: the object and how its keys become files.
type Source struct {
	// Name is the object's name, in the pod's namespace.
	Name        string
	Items       []v1.KeyToPath
	DefaultMode *int32
	Optional    *bool
}

// Options configure a Plugin.
type Options struct {
	// NoTmpfs keeps the volumes of a Memory kind on disk.
	NoTmpfs bool
	// Logger receives content updates (V(1)), the fall-back to disk and
	// the content kept while the API server is unreachable.
	Logger logr.Logger
}

// Plugin sets up the volumes of one kind. It is safe for concurrent use.
type Plugin[G any] struct {
	get  G
	kind Kind[G]
	dirs *projection.Dirs
}

// New returns the plugin of kind, getting objects through get.
func New[G any](get G, kind Kind[G], opts Options) (*Plugin[G], error) {
	if any(get) == nil {
		return nil, fmt.Errorf("%s: the Getter is nil", kind.Package)
	}
	return &Plugin[G]{get: get, kind: kind, dirs: &projection.Dirs{
		Plugin:  kind.Package,
		Memory:  kind.Memory,
		NoTmpfs: opts.NoTmpfs,
		Log:     opts.Logger.WithName(kind.Package),
	}}, nil
}

// NewForClient returns the plugin of kind getting each object from the
// API server through client, at every SetUp.
func NewForClient[G any](client kubeclient.Interface, kind Kind[G], opts Options) (*Plugin[G], error) {
	if client == nil {
		return nil, fmt.Errorf("%s: the client is nil", kind.Package)
	}
	get, ok := any(projection.Client{Client: client}).(G)
	if !ok {
		return nil, fmt.Errorf("%s: the client cannot get a %s", kind.Package, kind.Source)
	}
	return New(get, kind, opts)
}

// Name returns the kind's plugin name.
func (p *Plugin[G]) Name() string { return p.kind.Name }

// CanSupport reports whether vol is a volume of the plugin's kind.
func (p *Plugin[G]) CanSupport(vol *v1.Volume) bool {
	_, ok := p.kind.Volume(vol)
	return ok
}

// RequiresRefresh reports whether the volume manager should call SetUp
// again, periodically, for a volume already set up: true for every volume
// of the plugin's kind, whose object may change (the kubelet's
// RequiresRemount).
func (p *Plugin[G]) RequiresRefresh(vol *v1.Volume) bool { return p.CanSupport(vol) }

// SetUp gets the object from the pod's namespace and writes its keys (or
// the items the volume selects) into req.Dir with the atomic writer (on a
// tmpfs for a Memory kind); when they are already there it writes
// nothing. A missing optional object gives an empty volume; a missing
// object otherwise is an error naming it, which the volume manager
// retries. When the API server cannot be reached and the volume was set
// up before, its content is kept.
func (p *Plugin[G]) SetUp(ctx context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	src, ok := p.kind.Volume(req.Volume)
	if !ok {
		return volume.Mount{}, p.dirs.NotA(req, p.kind.Source)
	}
	return p.dirs.SetUpKeys(ctx, req, projection.KeySource{
		Kind: p.kind.Source, Name: src.Name, Items: src.Items, DefaultMode: src.DefaultMode, Optional: src.Optional,
		Get: p.kind.Keys(p.get, src.Name),
	})
}

// TearDown unmounts the volume's tmpfs, if it has one, and removes its
// directory.
func (p *Plugin[G]) TearDown(_ context.Context, req volume.TearDownRequest) error {
	return p.dirs.TearDown(req)
}

var (
	_ volume.Plugin    = (*Plugin[any])(nil)
	_ volume.Refresher = (*Plugin[any])(nil)
)
