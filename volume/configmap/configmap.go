package configmap

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/projection"
)

// PluginName is the plugin's name, the kubelet's; its volumes live in
// <root>/pods/<uid>/volumes/kubernetes.io~configmap/<name>.
const PluginName = "kubernetes.io/configmap"

// Getter gets the ConfigMaps that volumes show. When the ConfigMap does
// not exist, the error must satisfy apierrors.IsNotFound. It is the
// objects package's, so the getter that serves the containers'
// environment (an objects.Cache, or a standalone agent's own) serves the
// volumes too.
type Getter = objects.ConfigMapGetter

// GetterFunc is a Getter made of a function.
type GetterFunc = objects.ConfigMapFunc

// Options configure the configMap plugin.
type Options struct {
	// Logger receives content updates (V(1)) and the content kept while
	// the API server is unreachable. Defaults to discarding.
	Logger logr.Logger
}

// Plugin sets up configMap volumes. It is safe for concurrent use.
type Plugin struct {
	get  Getter
	dirs *projection.Dirs
}

var _ volume.Plugin = (*Plugin)(nil)

// New returns the configMap plugin, getting ConfigMaps from get.
func New(get Getter, opts Options) (*Plugin, error) {
	if get == nil {
		return nil, errors.New("configmap: the Getter is nil")
	}
	return &Plugin{get: get, dirs: &projection.Dirs{Plugin: "configmap", Log: opts.Logger.WithName("configmap")}}, nil
}

// NewForClient returns the configMap plugin getting each ConfigMap from
// the API server through client, at every SetUp.
func NewForClient(client kubeclient.Interface, opts Options) (*Plugin, error) {
	if client == nil {
		return nil, errors.New("configmap: the client is nil")
	}
	return New(projection.Client{Client: client}, opts)
}

// Name returns PluginName.
func (p *Plugin) Name() string { return PluginName }

// CanSupport reports whether vol is a configMap volume.
func (p *Plugin) CanSupport(vol *v1.Volume) bool { return vol.ConfigMap != nil }

// RequiresRefresh reports whether the volume manager should call SetUp
// again, periodically, for a volume already set up: true for every
// configMap volume, whose ConfigMap may change (the kubelet's
// RequiresRemount).
func (p *Plugin) RequiresRefresh(vol *v1.Volume) bool { return vol.ConfigMap != nil }

// SetUp gets the ConfigMap from the pod's namespace and writes its keys
// (or the items the volume selects) into req.Dir with the atomic writer;
// when they are already there it writes nothing. A missing optional
// ConfigMap gives an empty volume; a missing ConfigMap otherwise is an
// error naming it, which the volume manager retries. When the API server
// cannot be reached and the volume was set up before, its content is kept.
func (p *Plugin) SetUp(ctx context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	src := req.Volume.ConfigMap
	if src == nil {
		return volume.Mount{}, p.dirs.NotA(req, "configMap")
	}
	return p.dirs.SetUpKeys(ctx, req, projection.KeySource{
		Kind: "configMap", Name: src.Name, Items: src.Items, DefaultMode: src.DefaultMode, Optional: src.Optional,
		Get: projection.ConfigMapKeys(p.get, src.Name),
	})
}

// TearDown removes the volume's directory.
func (p *Plugin) TearDown(_ context.Context, req volume.TearDownRequest) error {
	return p.dirs.TearDown(req)
}
