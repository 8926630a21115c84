package objects

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ConfigMapGetter gets a ConfigMap. When it does not exist, the error
// satisfies apierrors.IsNotFound.
type ConfigMapGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
}

// SecretGetter gets a Secret. When it does not exist, the error satisfies
// apierrors.IsNotFound.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// Getter gets both: the one source of the ConfigMaps and Secrets that
// environment variables, volumes and image pulls read.
type Getter interface {
	ConfigMapGetter
	SecretGetter
}

// ConfigMapFunc is a ConfigMapGetter made of a function.
type ConfigMapFunc func(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)

// GetConfigMap calls f.
func (f ConfigMapFunc) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return f(ctx, namespace, name)
}

// SecretFunc is a SecretGetter made of a function.
type SecretFunc func(ctx context.Context, namespace, name string) (*v1.Secret, error)

// GetSecret calls f.
func (f SecretFunc) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return f(ctx, namespace, name)
}

// Funcs is a Getter made of two functions. A nil function finds nothing:
// it returns a NotFound error.
type Funcs struct {
	ConfigMap ConfigMapFunc
	Secret    SecretFunc
}

var (
	_ Getter          = Funcs{}
	_ ConfigMapGetter = ConfigMapFunc(nil)
	_ SecretGetter    = SecretFunc(nil)
)

// GetConfigMap calls f.ConfigMap.
func (f Funcs) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	if f.ConfigMap == nil {
		return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
	}
	return f.ConfigMap(ctx, namespace, name)
}

// GetSecret calls f.Secret.
func (f Funcs) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	if f.Secret == nil {
		return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
	}
	return f.Secret(ctx, namespace, name)
}
