package mirror_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/mirror"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status/statustest"
)

func ExampleNew() {
	client := statustest.NewFakeAPI(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	mirrors, err := mirror.New(clientset.From(client), mirror.Options{NodeName: "node-a"})
	if err != nil {
		panic(err)
	}
	static := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-node-a", UID: "0f3c",
			Annotations: map[string]string{sources.AnnotationSource: sources.FileSource, sources.AnnotationHash: "0f3c"}},
		Spec: v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "etcd", Image: "etcd:3.7"}}},
	}
	// The agent's housekeeping calls Sync with its static pods.
	if err := mirrors.Sync(context.Background(), []*v1.Pod{static}); err != nil {
		panic(err)
	}
	mp, _ := mirrors.MirrorPod(static)
	fmt.Println(mp.Name, mp.Annotations[sources.AnnotationMirror], mp.OwnerReferences[0].Kind, podmodel.IsMirror(mp))
	// Output: etcd-node-a 0f3c Node true
}
