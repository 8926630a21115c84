package bootstrap_test

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/kubeclient/bootstrap"
)

// A node agent's credentials: a client certificate requested with the
// bootstrap token when none is kept, renewed before it expires.
func ExampleNew() {
	creds, err := bootstrap.New(bootstrap.Options{
		NodeName:            "edge-1",
		Kubeconfig:          "/etc/kubernetes/nodekit.conf",
		BootstrapKubeconfig: "/etc/kubernetes/bootstrap-kubelet.conf",
		CertDir:             "/var/lib/nodekit/pki",
		Rotate:              true,
	})
	if err != nil {
		panic(err)
	}
	g, ctx := errgroup.WithContext(context.Background())
	g.Go(func() error { return creds.Run(ctx) })
	cfg, err := creds.Wait(ctx) // once a certificate is issued
	if err != nil {
		panic(err)
	}
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		panic(err)
	}
	_ = client // the agent's Options.KubeClient
	_ = g.Wait()
}
