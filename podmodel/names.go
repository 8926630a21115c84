package podmodel

import v1 "k8s.io/api/core/v1"

// The annotations the pod sources set and the mirror pods carry, as the
// kubelet names them.
const (
	// AnnotationSource names the source a pod came from ("file", "http",
	// "api", ...).
	AnnotationSource = "kubernetes.io/config.source"
	// AnnotationSeen is when the pod was first seen, RFC 3339 with
	// nanoseconds.
	AnnotationSeen = "kubernetes.io/config.seen"
	// AnnotationHash is a static pod's hash; its UID is derived from it.
	AnnotationHash = "kubernetes.io/config.hash"
	// AnnotationMirror marks a mirror pod; its value is the static pod's
	// hash.
	AnnotationMirror = "kubernetes.io/config.mirror"
)

// APIServerSource is the source name of the API server's pods: the only
// source whose pods are not static pods.
const APIServerSource = "api"

// FullName is the pod's "namespace/name": the key that maps a static pod to
// its mirror pod, and the name in the agent's logs.
func FullName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// IsStatic reports whether the pod came from a source other than the API
// server (a file or a URL): its config.source annotation is set and is not
// "api". The kubelet's kubetypes.IsStaticPod.
func IsStatic(pod *v1.Pod) bool {
	src, ok := pod.Annotations[AnnotationSource]
	return ok && src != APIServerSource
}

// IsMirror reports whether the pod is a mirror pod: it carries the
// config.mirror annotation. An agent never runs a mirror pod; it reports
// its static pod's status through it.
func IsMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[AnnotationMirror]
	return ok
}

// Hash is a static pod's config.hash, or its UID when the annotation is
// missing (the static sources set both to the same value).
func Hash(pod *v1.Pod) string {
	if h, ok := pod.Annotations[AnnotationHash]; ok && h != "" {
		return h
	}
	return string(pod.UID)
}

// IsMirrorOf reports whether mirror is the mirror pod of the static pod as
// it is now: same namespace and name, and a config.mirror annotation equal
// to the static pod's hash. A mirror of an earlier version of the manifest
// is stale.
func IsMirrorOf(mirror, static *v1.Pod) bool {
	if mirror == nil || static == nil || mirror.Namespace != static.Namespace || mirror.Name != static.Name {
		return false
	}
	hash, ok := mirror.Annotations[AnnotationMirror]
	return ok && hash == Hash(static)
}

// IsRestartableInit reports whether c is a restartable init container (a
// sidecar): an init container with restartPolicy Always.
func IsRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// IsTerminal reports whether a pod in this phase is done for good:
// Succeeded or Failed.
func IsTerminal(phase v1.PodPhase) bool {
	return phase == v1.PodSucceeded || phase == v1.PodFailed
}
