package apiserver_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/sources/apiserver"
)

func ExampleNew() {
	// A real agent passes a clientset built from its kubeconfig.
	client := fake.NewClientset(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1"},
		Spec:       v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	})
	src, err := apiserver.New(clientset.From(client), "node-1", apiserver.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	snapshots := make(chan []*v1.Pod)
	done := make(chan error)
	go func() { done <- src.Run(ctx, snapshots) }()

	pods := <-snapshots
	fmt.Println(len(pods), pods[0].Namespace+"/"+pods[0].Name)
	cancel()
	<-done
	// Output: 1 default/web
}
