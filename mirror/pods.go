package mirror

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
)

// newMirrorPod builds the mirror pod of static: its name, namespace,
// labels, annotations (plus config.mirror) and spec, owned by the Node.
func newMirrorPod(static *v1.Pod, nodeName string, nodeUID types.UID) *v1.Pod {
	annotations := make(map[string]string, len(static.Annotations)+1)
	for k, v := range static.Annotations {
		annotations[k] = v
	}
	annotations[podmodel.AnnotationMirror] = podmodel.Hash(static)
	var labels map[string]string
	if len(static.Labels) > 0 {
		labels = make(map[string]string, len(static.Labels))
		for k, v := range static.Labels {
			labels[k] = v
		}
	}
	controller := true
	pod := &v1.Pod{}
	pod.Namespace, pod.Name = static.Namespace, static.Name
	pod.Labels, pod.Annotations = labels, annotations
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       nodeName,
		UID:        nodeUID,
		Controller: &controller,
	}}
	pod.Spec = *static.Spec.DeepCopy()
	pod.Spec.NodeName = nodeName
	return pod
}
