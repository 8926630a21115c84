package projection

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/volume"
)

// KeySource is one object whose keys a volume projects: a configMap or a
// secret volume's source.
type KeySource struct {
	// Kind names the source in errors: "configMap", "secret".
	Kind string
	// Name is the object's name, in the pod's namespace.
	Name        string
	Items       []v1.KeyToPath
	DefaultMode *int32
	Optional    *bool
	// Get returns the object's keys. found is false, with a nil error,
	// when the getter gave no object and no error.
	Get func(ctx context.Context, namespace string) (data map[string][]byte, found bool, err error)
}

// Files returns the files of src's keys (or of the items it selects) in
// namespace ns: none for a missing optional object, an error naming a
// missing object otherwise.
func (src KeySource) Files(ctx context.Context, ns string) (Files, error) {
	what, data, err := src.read(ctx, ns)
	if err != nil {
		return nil, err
	}
	return KeyFiles(what, data, src.Items, src.DefaultMode, Optional(src.Optional))
}

// read gets src's keys; what names the object in errors.
func (src KeySource) read(ctx context.Context, ns string) (what string, data map[string][]byte, err error) {
	if src.Name == "" {
		return "", nil, volume.Mark(fmt.Errorf("the %s's name is empty", src.Kind), volume.ErrInvalid)
	}
	what = fmt.Sprintf("%s %s/%s", src.Kind, ns, src.Name)
	data, found, err := src.Get(ctx, ns)
	switch {
	case err == nil && !found:
		return what, nil, fmt.Errorf("getting %s: no object and no error", what)
	case apierrors.IsNotFound(err) && Optional(src.Optional):
		return what, nil, nil
	case err != nil:
		return what, nil, fmt.Errorf("getting %s: %w", what, err)
	}
	return what, data, nil
}

// SetUpKeys is the SetUp of a volume projecting src's keys into req.Dir
// (KeySource.Files): when the object cannot be read and the volume was
// set up before, its content is kept.
func (d *Dirs) SetUpKeys(ctx context.Context, req volume.SetUpRequest, src KeySource) (volume.Mount, error) {
	ns := req.Pod.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	what, data, err := src.read(ctx, ns)
	if err != nil {
		if d.KeepOnError(ctx, req, err) {
			return d.Mount(req), nil
		}
		return volume.Mount{}, d.Errorf(req.Volume.Name, err)
	}
	files, err := KeyFiles(what, data, src.Items, src.DefaultMode, Optional(src.Optional))
	if err != nil {
		return volume.Mount{}, d.Errorf(req.Volume.Name, err)
	}
	return d.Write(req, files)
}

// NotA is the error of a SetUp given a volume of another kind.
func (d *Dirs) NotA(req volume.SetUpRequest, kind string) error {
	return d.Errorf(req.Volume.Name, volume.Mark(errors.New("not a "+kind+" volume"), volume.ErrInvalid))
}

// ConfigMapGetter gets a ConfigMap; its error satisfies apierrors.IsNotFound
// for one that does not exist. It is the objects package's, so that
// ConfigMapKeys is the Keys of the configMap plugin's kind.
type ConfigMapGetter = objects.ConfigMapGetter

// SecretGetter gets a Secret; its error satisfies apierrors.IsNotFound for
// one that does not exist. It is the objects package's, as ConfigMapGetter.
type SecretGetter = objects.SecretGetter

// ConfigMapKeys is a KeySource.Get reading ConfigMap name's Data and
// BinaryData.
func ConfigMapKeys(get ConfigMapGetter, name string) func(context.Context, string) (map[string][]byte, bool, error) {
	return func(ctx context.Context, ns string) (map[string][]byte, bool, error) {
		cm, err := get.GetConfigMap(ctx, ns, name)
		if err != nil || cm == nil {
			return nil, false, err
		}
		return ConfigMapData(cm), true, nil
	}
}

// SecretKeys is a KeySource.Get reading Secret name's Data.
func SecretKeys(get SecretGetter, name string) func(context.Context, string) (map[string][]byte, bool, error) {
	return func(ctx context.Context, ns string) (map[string][]byte, bool, error) {
		s, err := get.GetSecret(ctx, ns, name)
		if err != nil || s == nil {
			return nil, false, err
		}
		return s.Data, true, nil
	}
}
