package projected

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/atomicwriter"
	"github.com/nodekit/nodekit/volume/internal/projection"
)

// PluginName is the plugin's name, the kubelet's; its volumes live in
// <root>/pods/<uid>/volumes/kubernetes.io~projected/<name>.
const PluginName = "kubernetes.io/projected"

// DefaultServiceAccount is the service account whose tokens a pod gets
// when its spec names none (the API server's ServiceAccount admission
// sets it; static pods and servers without it leave it empty).
const DefaultServiceAccount = "default"

// Getter gets what projected volumes show: ConfigMaps, Secrets, and
// service-account tokens (TokenRequest). When a ConfigMap or Secret does
// not exist, the error must satisfy apierrors.IsNotFound.
type Getter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// CreateToken requests a token for the service account, as client-go's
	// CoreV1().ServiceAccounts(namespace).CreateToken.
	CreateToken(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// Funcs is a Getter made of functions; a nil function fails its calls.
type Funcs struct {
	ConfigMapFunc func(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	SecretFunc    func(ctx context.Context, namespace, name string) (*v1.Secret, error)
	TokenFunc     func(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

var _ Getter = Funcs{}

// GetConfigMap calls f.ConfigMapFunc.
func (f Funcs) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	if f.ConfigMapFunc == nil {
		return nil, errors.New("projected: no ConfigMap getter")
	}
	return f.ConfigMapFunc(ctx, namespace, name)
}

// GetSecret calls f.SecretFunc.
func (f Funcs) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	if f.SecretFunc == nil {
		return nil, errors.New("projected: no Secret getter")
	}
	return f.SecretFunc(ctx, namespace, name)
}

// CreateToken calls f.TokenFunc.
func (f Funcs) CreateToken(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if f.TokenFunc == nil {
		return nil, errors.New("projected: no token requester")
	}
	return f.TokenFunc(ctx, namespace, serviceAccount, tr)
}

// Options configure the projected plugin.
type Options struct {
	// NodeAllocatable returns the node's allocatable resources, for
	// downwardAPI sources' resourceFieldRefs (see package downwardapi).
	// Defaults to none: a limit a container does not set reads as 0.
	NodeAllocatable func() v1.ResourceList
	// NoTmpfs keeps the volumes on disk instead of a tmpfs of their own.
	// An agent that is not root, or may not mount, keeps them on disk
	// anyway, and logs it once. Defaults to false: a tmpfs, as the
	// kubelet, so that tokens and secrets never reach the disk.
	NoTmpfs bool
	// Logger receives content updates (V(1)), the fall-back to disk, token
	// refreshes that failed, and the content kept while the API server is
	// unreachable. Defaults to discarding.
	Logger logr.Logger
}

// Plugin sets up projected volumes. It is safe for concurrent use. It
// caches the service-account tokens it requested until they are due for
// refresh, their pod's volume is torn down, or they expire.
type Plugin struct {
	get         Getter
	allocatable func() v1.ResourceList
	dirs        *projection.Dirs
	tokens      *tokens
}

var _ volume.Plugin = (*Plugin)(nil)

// New returns the projected plugin, getting ConfigMaps, Secrets and tokens
// from get.
func New(get Getter, opts Options) (*Plugin, error) {
	if get == nil {
		return nil, errors.New("projected: the Getter is nil")
	}
	log := opts.Logger.WithName("projected")
	return &Plugin{
		get:         get,
		allocatable: opts.NodeAllocatable,
		dirs:        &projection.Dirs{Plugin: "projected", Memory: true, NoTmpfs: opts.NoTmpfs, Log: log},
		tokens:      &tokens{create: get.CreateToken, log: log},
	}, nil
}

// NewForClient returns the projected plugin getting ConfigMaps and Secrets
// from the API server through client at every SetUp, and requesting
// tokens through its TokenRequest API.
func NewForClient(client kubeclient.Interface, opts Options) (*Plugin, error) {
	if client == nil {
		return nil, errors.New("projected: the client is nil")
	}
	return New(projection.Client{Client: client}, opts)
}

// Name returns PluginName.
func (p *Plugin) Name() string { return PluginName }

// CanSupport reports whether vol is a projected volume.
func (p *Plugin) CanSupport(vol *v1.Volume) bool { return vol.Projected != nil }

// RequiresRefresh reports whether the volume manager should call SetUp
// again, periodically and with the pod's latest version, for a volume
// already set up: true for every projected volume, whose sources may
// change and whose tokens expire (the kubelet's RequiresRemount).
func (p *Plugin) RequiresRefresh(vol *v1.Volume) bool { return vol.Projected != nil }

// SetUp collects the files of every source of the volume (ConfigMap and
// Secret keys, downward API values, service-account tokens) and writes
// them into req.Dir, on a tmpfs, with the atomic writer; when they are
// already there it writes nothing. A token is requested again once 80%
// of its lifetime has passed.
func (p *Plugin) SetUp(ctx context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	src := req.Volume.Projected
	if src == nil {
		return volume.Mount{}, p.dirs.Errorf(req.Volume.Name, volume.Mark(errors.New("not a projected volume"), volume.ErrInvalid))
	}
	files, err := p.collect(ctx, req.Pod, src)
	if err != nil {
		if p.dirs.KeepOnError(ctx, req, err) {
			return p.dirs.Mount(req), nil
		}
		return volume.Mount{}, p.dirs.Errorf(req.Volume.Name, err)
	}
	return p.dirs.Write(req, files)
}

// collect returns the files of every source; later sources win a path.
func (p *Plugin) collect(ctx context.Context, pod *v1.Pod, src *v1.ProjectedVolumeSource) (projection.Files, error) {
	ns := pod.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	def, err := projection.Mode(src.DefaultMode, projection.DefaultMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	files := projection.Files{}
	var errs []error
	var allocatable v1.ResourceList
	allocatableRead := false
	for i, s := range src.Sources {
		var got projection.Files
		var err error
		switch {
		case s.ConfigMap != nil:
			got, err = p.configMap(ctx, ns, s.ConfigMap, src.DefaultMode)
		case s.Secret != nil:
			got, err = p.secret(ctx, ns, s.Secret, src.DefaultMode)
		case s.DownwardAPI != nil:
			if !allocatableRead && p.allocatable != nil {
				allocatable, allocatableRead = p.allocatable(), true
			}
			got, err = projection.DownwardAPIFiles(s.DownwardAPI.Items, pod, src.DefaultMode, allocatable)
		case s.ServiceAccountToken != nil:
			got, err = p.token(ctx, ns, pod, s.ServiceAccountToken, def)
		case s.ClusterTrustBundle != nil:
			err = volume.Mark(errors.New("clusterTrustBundle sources are not supported"), volume.ErrInvalid)
		case s.PodCertificate != nil:
			err = volume.Mark(errors.New("podCertificate sources are not supported"), volume.ErrInvalid)
		default:
			err = volume.Mark(errors.New("no source set"), volume.ErrInvalid)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sources[%d]: %w", i, err))
			continue
		}
		maps.Copy(files, got)
	}
	return files, errors.Join(errs...)
}

func (p *Plugin) configMap(ctx context.Context, ns string, s *v1.ConfigMapProjection, defaultMode *int32) (projection.Files, error) {
	return projection.KeySource{
		Kind: "configMap", Name: s.Name, Items: s.Items, DefaultMode: defaultMode, Optional: s.Optional,
		Get: projection.ConfigMapKeys(p.get, s.Name),
	}.Files(ctx, ns)
}

func (p *Plugin) secret(ctx context.Context, ns string, s *v1.SecretProjection, defaultMode *int32) (projection.Files, error) {
	return projection.KeySource{
		Kind: "secret", Name: s.Name, Items: s.Items, DefaultMode: defaultMode, Optional: s.Optional,
		Get: projection.SecretKeys(p.get, s.Name),
	}.Files(ctx, ns)
}

// token is the file of a serviceAccountToken source: the token at its
// path, with defaultMode, or 0600 owned by the pod's user when every
// container runs as the same one or the pod has an fsGroup (which then
// adds group read), as the kubelet.
func (p *Plugin) token(ctx context.Context, ns string, pod *v1.Pod, s *v1.ServiceAccountTokenProjection, def fs.FileMode) (projection.Files, error) {
	if err := projection.Path(s.Path); err != nil {
		return nil, err
	}
	exp := int64(DefaultExpirationSeconds)
	if s.ExpirationSeconds != nil {
		exp = *s.ExpirationSeconds
	}
	if exp <= 0 {
		return nil, volume.Mark(fmt.Errorf("expirationSeconds %d is not positive", exp), volume.ErrInvalid)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = DefaultServiceAccount
	}
	tr, err := p.tokens.get(ctx, tokenKey{
		namespace:         ns,
		serviceAccount:    sa,
		audience:          s.Audience,
		expirationSeconds: exp,
		podName:           pod.Name,
		podUID:            pod.UID,
	})
	if err != nil {
		return nil, err
	}
	fsUser := projection.FsUser(pod)
	mode := def
	if fsUser != nil || projection.FSGroup(pod) != nil {
		mode = 0o600
	}
	return projection.Files{s.Path: atomicwriter.File{Data: []byte(tr.Status.Token), Mode: mode, FsUser: fsUser}}, nil
}

// TearDown unmounts the volume's tmpfs, removes its directory, and forgets
// the tokens bound to the pod.
func (p *Plugin) TearDown(_ context.Context, req volume.TearDownRequest) error {
	p.tokens.forget(req.PodUID)
	return p.dirs.TearDown(req)
}
