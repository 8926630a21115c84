package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RuntimeClassOptions configure RuntimeClass.
type RuntimeClassOptions struct {
	// Lookup returns the handler of the named RuntimeClass (from an
	// informer's lister, say), or an error: the API's NotFound error
	// (apierrors.IsNotFound) for a class that does not exist. Nil admits
	// every pod, as a kubelet without an API client, which ignores
	// runtimeClassName.
	Lookup func(name string) (handler string, err error)
	// Handlers are the runtime handlers the node can run pods with (the
	// CRI runtime_handlers of its runtime's Status, or the one handler its
	// runtime manager uses). Nil, or a function returning none (the
	// handlers not known yet, or a runtime that does not list them, as
	// containerd 1.6), accepts every handler.
	Handlers func() []string
}

// RuntimeClass rejects, with reason RuntimeClass, a pod whose
// spec.runtimeClassName names a RuntimeClass that cannot be found (the
// message is the look-up's error: `runtimeclass.node.k8s.io "gvisor"
// not found`) or whose handler the node's runtime does not offer
// (`RuntimeClass "gvisor" names the runtime handler "runsc", which this
// node does not offer`). A look-up that fails otherwise (the RuntimeClasses
// not listed yet, the API server unreachable) admits the pod: creating its
// sandbox looks the class up again, and fails and is retried, as with the
// kubelet, until the look-up answers.
//
// The kubelet admits such pods and fails each attempt to create their
// sandbox; nodekit rejects them once, with the same cause, so that they
// do not retry forever.
func RuntimeClass(opts RuntimeClassOptions) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" || opts.Lookup == nil {
			return Admitted()
		}
		name := *pod.Spec.RuntimeClassName
		handler, err := opts.Lookup(name)
		if apierrors.IsNotFound(err) {
			return Result{Reason: ReasonRuntimeClass, Message: err.Error()}
		}
		if err != nil {
			return Admitted()
		}
		if opts.Handlers == nil {
			return Admitted()
		}
		if hs := opts.Handlers(); len(hs) > 0 && !slices.Contains(hs, handler) {
			return Result{Reason: ReasonRuntimeClass,
				Message: fmt.Sprintf("RuntimeClass %q names the runtime handler %q, which this node does not offer", name, handler)}
		}
		return Admitted()
	})
}

// NoNewPrivs rejects, with reason NoNewPrivs and "Cannot enforce
// NoNewPrivs: <why>", a pending pod with a container that sets
// allowPrivilegeEscalation: false when supported reports an error. The
// kubelet ran this check for Docker runtimes older than API 1.23; every
// CRI runtime enforces no_new_privs, so the kubelet v1.37 admits such pods
// and the agent does not run this check by default. It is for runtimes
// that cannot set no_new_privs.
func NoNewPrivs(supported func() error) Handler {
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		if pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
			return Admitted()
		}
		required := false
		for _, c := range pod.Spec.Containers {
			if c.SecurityContext != nil && c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation {
				required = true
				break
			}
		}
		if !required {
			return Admitted()
		}
		if err := supported(); err != nil {
			return Result{Reason: ReasonNoNewPrivs, Message: "Cannot enforce NoNewPrivs: " + err.Error()}
		}
		return Admitted()
	})
}
