package secret

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
// <root>/pods/<uid>/volumes/kubernetes.io~secret/<name>.
const PluginName = "kubernetes.io/secret"

// Getter gets the Secrets that volumes show. When the Secret does not
// exist, the error must satisfy apierrors.IsNotFound. It is the objects
// package's, so the getter that serves the containers' environment (an
// objects.Cache, or a standalone agent's own) serves the volumes too.
type Getter = objects.SecretGetter

// GetterFunc is a Getter made of a function.
type GetterFunc = objects.SecretFunc

// Options configure the secret plugin.
type Options struct {
	// NoTmpfs keeps secret volumes on disk instead of a tmpfs of their
	// own. An agent that is not root, or may not mount, keeps them on disk
	// anyway, and logs it once. Defaults to false: a tmpfs, as the
	// kubelet, so that secrets never reach the disk.
	NoTmpfs bool
	// Logger receives content updates (V(1)), the fall-back to disk, and
	// the content kept while the API server is unreachable. Defaults to
	// discarding.
	Logger logr.Logger
}

// Plugin sets up secret volumes. It is safe for concurrent use.
type Plugin struct {
	get  Getter
	dirs *projection.Dirs
}

var _ volume.Plugin = (*Plugin)(nil)

// New returns the secret plugin, getting Secrets from get.
func New(get Getter, opts Options) (*Plugin, error) {
	if get == nil {
		return nil, errors.New("secret: the Getter is nil")
	}
	return &Plugin{get: get, dirs: &projection.Dirs{
		Plugin:  "secret",
		Memory:  true,
		NoTmpfs: opts.NoTmpfs,
		Log:     opts.Logger.WithName("secret"),
	}}, nil
}

// NewForClient returns the secret plugin getting each Secret from the API
// server through client, at every SetUp.
func NewForClient(client kubeclient.Interface, opts Options) (*Plugin, error) {
	if client == nil {
		return nil, errors.New("secret: the client is nil")
	}
	return New(projection.Client{Client: client}, opts)
}

// Name returns PluginName.
func (p *Plugin) Name() string { return PluginName }

// CanSupport reports whether vol is a secret volume.
func (p *Plugin) CanSupport(vol *v1.Volume) bool { return vol.Secret != nil }

// RequiresRefresh reports whether the volume manager should call SetUp
// again, periodically, for a volume already set up: true for every secret
// volume, whose Secret may change (the kubelet's RequiresRemount).
func (p *Plugin) RequiresRefresh(vol *v1.Volume) bool { return vol.Secret != nil }

// SetUp gets the Secret from the pod's namespace and writes its keys (or
// the items the volume selects) into req.Dir, on a tmpfs, with the atomic
// writer; when they are already there it writes nothing. A missing
// optional Secret gives an empty volume; a missing Secret otherwise is an
// error naming it, which the volume manager retries. When the API server
// cannot be reached and the volume was set up before, its content is kept.
func (p *Plugin) SetUp(ctx context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	src := req.Volume.Secret
	if src == nil {
		return volume.Mount{}, p.dirs.NotA(req, "secret")
	}
	return p.dirs.SetUpKeys(ctx, req, projection.KeySource{
		Kind: "secret", Name: src.SecretName, Items: src.Items, DefaultMode: src.DefaultMode, Optional: src.Optional,
		Get: projection.SecretKeys(p.get, src.SecretName),
	})
}

// TearDown unmounts the volume's tmpfs and removes its directory.
func (p *Plugin) TearDown(_ context.Context, req volume.TearDownRequest) error {
	return p.dirs.TearDown(req)
}
