package objects

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubeclient"
)

// APIServer is a Getter that reads every object from the API server
// (wrap it in a Cache, as the agent does).
type APIServer struct{ Client kubeclient.Interface }

var _ Getter = APIServer{}

// GetConfigMap implements Getter.
func (g APIServer) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return g.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetSecret implements Getter.
func (g APIServer) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return g.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}
