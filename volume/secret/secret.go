package secret

import (
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/volume/internal/objectvolume"
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

// Plugin sets up secret volumes, a volume.Plugin and volume.Refresher:
// Name returns PluginName; CanSupport and RequiresRefresh report whether
// a volume is a secret volume (every one is refreshed, its Secret may
// change); SetUp gets the Secret from the pod's namespace and writes its
// keys (or the items the volume selects) into the volume's directory, on
// a tmpfs, with the atomic writer, writing nothing when they are there
// already; TearDown unmounts the tmpfs and removes the directory. A
// missing optional Secret gives an empty volume; a missing Secret
// otherwise is an error naming it, which the volume manager retries. When
// the API server cannot be reached and the volume was set up before, its
// content is kept. It is safe for concurrent use.
type Plugin = objectvolume.Plugin[Getter]

// New returns the secret plugin, getting Secrets from get.
func New(get Getter, opts Options) (*Plugin, error) {
	return objectvolume.New(get, kind(), objectvolume.Options{NoTmpfs: opts.NoTmpfs, Logger: opts.Logger})
}

// NewForClient returns the secret plugin getting each Secret from the API
// server through client, at every SetUp.
func NewForClient(client kubeclient.Interface, opts Options) (*Plugin, error) {
	return objectvolume.NewForClient(client, kind(), objectvolume.Options{NoTmpfs: opts.NoTmpfs, Logger: opts.Logger})
}

// kind is what sets secret volumes apart: on a tmpfs, data only.
func kind() objectvolume.Kind[Getter] {
	return objectvolume.Kind[Getter]{
		Name: PluginName, Package: "secret", Source: "secret", Memory: true,
		Volume: func(vol *v1.Volume) (objectvolume.Source, bool) {
			if s := vol.Secret; s != nil {
				return objectvolume.Source{Name: s.SecretName, Items: s.Items, DefaultMode: s.DefaultMode, Optional: s.Optional}, true
			}
			return objectvolume.Source{}, false
		},
		Keys: projection.SecretKeys,
	}
}
