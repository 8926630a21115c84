// Package runtime holds the container runtime as nodekit sees it: the
// CRI-shaped RuntimeService and ImageService interfaces, the runtime's view
// of pods (Pod, PodStatus), and the pod-level Manager that turns a v1.Pod
// into sandbox and container operations the way the kubelet's kuberuntime
// manager does.
//
// # Usage
//
// Any implementation of RuntimeService and ImageService works: the CRI gRPC
// client in runtime/cri, the in-memory runtime in runtime/runtimetest, or
// k8s.io/cri-api's own fakes (the interfaces here are a subset of cri-api's
// RuntimeService and ImageManagerService, with identical method signatures).
//
//	rt := runtimetest.New(runtimetest.Options{})
//	m, err := runtime.NewManager(rt, rt, runtime.ManagerOptions{})
//	...
//	status, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
//	result := m.SyncPod(ctx, pod, status)
//
// # Concurrency
//
// Manager is safe for concurrent use; callers (the pod workers) serialise the
// work on any one pod.
//
// # Errors
//
// Errors from the runtime are wrapped with the operation and the object
// they concern; SyncPod reports one error per failed action in its result.
package runtime
