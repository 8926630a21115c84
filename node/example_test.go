package node_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
)

func ExampleNew() {
	// A real agent passes a clientset built from its kubeconfig.
	client := fake.NewClientset()
	ctl, err := node.New(clientset.From(client), "node-1", node.Options{
		Labels:  map[string]string{"topology.kubernetes.io/zone": "lab"},
		Machine: &node.Machine{CPUs: 4, MemoryBytes: 8 << 30, OperatingSystem: "linux", Architecture: "arm64"},
		Health:  func() error { return nil },
		RuntimeVersion: func(context.Context) (string, error) {
			return "containerd://2.4.2", nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctl.Run(ctx) }()

	for {
		if _, ok := ctl.Node(); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	fmt.Println(n.Labels["kubernetes.io/arch"], n.Status.Capacity.Cpu(), n.Status.Capacity.Memory(), n.Status.NodeInfo.ContainerRuntimeVersion)
	cancel()
	<-done
	// Output: arm64 4 8Gi containerd://2.4.2
}
