package projection

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubeclient"
)

// Client gets the objects volumes show from the API server, one request
// each: the kubelet's "Get" change-detection strategy.
type Client struct {
	Client kubeclient.Interface
}

// GetConfigMap gets a ConfigMap.
func (c Client) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return c.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetSecret gets a Secret.
func (c Client) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return c.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateToken requests a token for a service account (TokenRequest).
func (c Client) CreateToken(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, tr, metav1.CreateOptions{})
}
