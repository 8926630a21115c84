package nodekit

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/credentials"
)

// wirePullSecrets gives the runtime manager the agent's Secrets getter
// (Options.Objects, or the API server's through the objects cache) for
// the pods' imagePullSecrets, unless Options.RuntimeManager has its own;
// and the node's logins after those the caller gives: the node docker
// config files and, when configured, the credential-provider plugins
// (their service-account tokens requested through KubeClient).
func (a *Agent) wirePullSecrets(o *podruntime.Options, log logr.Logger) error {
	if o.Secrets == nil && a.spec.objects != nil {
		o.Secrets = a.spec.objects
	}
	node := credentials.Providers{o.NodeCredentials, credentials.NodeFiles{RootDir: a.opts.RootDir, Log: log.WithName("credentials")}}
	cfg, bin := a.opts.ImageCredentialProviderConfig, a.opts.ImageCredentialProviderBinDir
	switch {
	case cfg == "" && bin == "":
	case cfg == "" || bin == "":
		return errors.New("nodekit: ImageCredentialProviderConfig and ImageCredentialProviderBinDir go together")
	default:
		popts := credentials.PluginOptions{ConfigPath: cfg, BinDir: bin, Log: log.WithName("credential-provider")}
		if client := a.opts.KubeClient; client != nil {
			popts.ServiceAccount = func(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
				return client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
			}
			popts.Token = func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
				return client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
			}
		}
		plugins, err := credentials.NewPlugins(popts)
		if err != nil {
			return fmt.Errorf("nodekit: image credential providers: %w", err)
		}
		node = append(node, plugins)
	}
	o.NodeCredentials = node
	return nil
}
