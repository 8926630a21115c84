package kubeclient_test

import (
	"log"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/kubeclient"
)

// An agent's client from a kubeconfig, speaking protobuf and with the
// kubelet's rate limit.
func ExampleNewForConfig() {
	cfg, err := clientcmd.BuildConfigFromFlags("", "/etc/nodekit/kubeconfig")
	if err != nil {
		log.Fatal(err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	_ = client // nodekit.Options{KubeClient: client, ...}
}
