package mirror

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/sources"
)

// IsStaticPod reports whether the pod came from a source other than the
// API server (a file or a URL): its config.source annotation is set and is
// not "api". The kubelet's kubetypes.IsStaticPod.
func IsStaticPod(pod *v1.Pod) bool {
	src, ok := pod.Annotations[sources.AnnotationSource]
	return ok && src != sources.APIServerSource
}

// IsMirrorPod reports whether the pod is a mirror pod: it carries the
// kubernetes.io/config.mirror annotation. The agent never runs a mirror
// pod; it only reports the status of its static pod through it.
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[sources.AnnotationMirror]
	return ok
}

// IsMirrorPodOf reports whether mirror is the mirror pod of the static pod
// as it is now: same namespace and name, and a config.mirror annotation
// equal to the static pod's config.hash. A mirror of an earlier version of
// the manifest is stale.
func IsMirrorPodOf(mirror, static *v1.Pod) bool {
	if mirror == nil || static == nil || mirror.Namespace != static.Namespace || mirror.Name != static.Name {
		return false
	}
	hash, ok := mirror.Annotations[sources.AnnotationMirror]
	return ok && hash == podHash(static)
}

// podHash is the static pod's config.hash, or its UID when the annotation
// is missing (the static sources set both to the same value).
func podHash(pod *v1.Pod) string {
	if h, ok := pod.Annotations[sources.AnnotationHash]; ok && h != "" {
		return h
	}
	return string(pod.UID)
}

// FullName is the pod's namespace/name, the key that maps a static pod to
// its mirror pod.
func FullName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// newMirrorPod builds the mirror pod of static: its name, namespace,
// labels, annotations (plus config.mirror) and spec, owned by the Node.
func newMirrorPod(static *v1.Pod, nodeName string, nodeUID types.UID) *v1.Pod {
	annotations := make(map[string]string, len(static.Annotations)+1)
	for k, v := range static.Annotations {
		annotations[k] = v
	}
	annotations[sources.AnnotationMirror] = podHash(static)
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
