// Package podmodel holds the pod rules every part of nodekit shares, each
// written once: a pod's quality-of-service class, its resource requests and
// limits, whether it is a static or a mirror pod, its full name, the values
// of downward-API fields, its phase and conditions, whether a container
// restarts (restart policies and restartPolicyRules), a container's
// runtime ID from its API status, and what a static pod may not use.
//
// Every function is pure: it reads the pod (and the arguments it is given)
// and changes nothing, so it is safe for concurrent use. The rules are the
// kubelet's (v1.37, default feature gates: pod-level resources on); where
// nodekit differs, the function's doc says so.
//
// # Usage
//
//	qos := podmodel.QOSClass(pod)          // status.qosClass, else computed
//	reqs := podmodel.Requests(pod)         // sidecars, init containers, pod-level resources, overhead
//	v, err := podmodel.FieldValue(pod, "metadata.labels['app']")
//	if podmodel.IsStatic(pod) { ... }
//	if err := podmodel.StaticPodForbiddenReference(pod); err != nil { ... } // reject it
//	restart := podmodel.ContainerShouldRestart(&c, &pod.Spec, exitCode)
//
// The package imports only the Kubernetes API types and
// k8s.io/component-helpers, so any part (runtime, cgroup, volume, status,
// an admission check of a user's) can use it without pulling in the others.
//
// # Errors
//
// FieldValue and ResourceValue return errors matching ErrInvalidField for a
// path, key, resource or container the downward API does not offer.
package podmodel
