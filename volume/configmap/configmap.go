package configmap

import (
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/volume/internal/objectvolume"
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

// Plugin sets up configMap volumes, a volume.Plugin and volume.Refresher:
// Name returns PluginName; CanSupport and RequiresRefresh report whether
// a volume is a configMap volume (every one is refreshed, its ConfigMap
// may change); SetUp gets the ConfigMap from the pod's namespace and
// writes its keys (or the items the volume selects) into the volume's
// directory with the atomic writer, writing nothing when they are there
// already; TearDown removes the directory. A missing optional ConfigMap
// gives an empty volume; a missing ConfigMap otherwise is an error naming
// it, which the volume manager retries. When the API server cannot be
// reached and the volume was set up before, its content is kept. It is
// safe for concurrent use.
type Plugin = objectvolume.Plugin[Getter]

// New returns the configMap plugin, getting ConfigMaps from get.
func New(get Getter, opts Options) (*Plugin, error) {
	return objectvolume.New(get, kind(), objectvolume.Options{Logger: opts.Logger})
}

// NewForClient returns the configMap plugin getting each ConfigMap from
// the API server through client, at every SetUp.
func NewForClient(client kubeclient.Interface, opts Options) (*Plugin, error) {
	return objectvolume.NewForClient(client, kind(), objectvolume.Options{Logger: opts.Logger})
}

// kind is what sets configMap volumes apart: on disk, data and binaryData.
func kind() objectvolume.Kind[Getter] {
	return objectvolume.Kind[Getter]{
		Name: PluginName, Package: "configmap", Source: "configMap",
		Volume: func(vol *v1.Volume) (objectvolume.Source, bool) {
			if s := vol.ConfigMap; s != nil {
				return objectvolume.Source{Name: s.Name, Items: s.Items, DefaultMode: s.DefaultMode, Optional: s.Optional}, true
			}
			return objectvolume.Source{}, false
		},
		Keys: projection.ConfigMapKeys,
	}
}
