// Package clientset adapts a client-go clientset to kubeclient.Interface,
// so that a program that already has one (a real clientset, or client-go's
// kubernetes/fake in tests) can give it to a nodekit agent.
//
// This package imports client-go's full clientset, and with it client-go's
// scheme of every built-in API group, which costs a program about 10 MiB of
// resident memory at start; kubeclient.NewForConfig does not. An agent
// that only talks to an API server should use kubeclient.NewForConfig.
//
// # Usage
//
//	cs := fake.NewClientset(objs...)
//	agent, err := nodekit.New(nodekit.Options{KubeClient: clientset.From(cs), ...})
package clientset

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/nodekit/nodekit/kubeclient"
)

// From returns a kubeclient.Interface whose calls go to cs, or nil when cs
// is nil. Each call of a
// group or resource accessor calls cs's, so a wrapper that overrides
// them (as a test's fake may) is honoured. It is as safe for concurrent
// use as cs.
func From(cs kubernetes.Interface) kubeclient.Interface {
	if cs == nil {
		return nil // a standalone agent, as a nil clientset was
	}
	return adapter{cs}
}

type adapter struct{ cs kubernetes.Interface }

// Unwrap returns the client-go clientset.
func (a adapter) Unwrap() kubernetes.Interface { return a.cs }

// IsWatchListSemanticsUnSupported tells client-go's reflector what the
// clientset tells it: a fake clientset cannot stream a list over a watch.
func (a adapter) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(a.cs)
}

func (a adapter) CoreV1() kubeclient.CoreV1Interface { return coreV1{a.cs} }

func (a adapter) NodeV1() kubeclient.NodeV1Interface { return nodeV1{a.cs} }

func (a adapter) CoordinationV1() kubeclient.CoordinationV1Interface { return coordinationV1{a.cs} }

func (a adapter) CertificatesV1() kubeclient.CertificatesV1Interface { return certificatesV1{a.cs} }

func (a adapter) AuthenticationV1() kubeclient.AuthenticationV1Interface {
	return authenticationV1{a.cs}
}

func (a adapter) AuthorizationV1() kubeclient.AuthorizationV1Interface {
	return authorizationV1{a.cs}
}

type coreV1 struct{ cs kubernetes.Interface }

func (c coreV1) Pods(namespace string) kubeclient.PodInterface { return c.cs.CoreV1().Pods(namespace) }

func (c coreV1) Nodes() kubeclient.NodeInterface { return c.cs.CoreV1().Nodes() }

func (c coreV1) Events(namespace string) kubeclient.EventInterface {
	return c.cs.CoreV1().Events(namespace)
}

func (c coreV1) ConfigMaps(namespace string) kubeclient.ConfigMapInterface {
	return c.cs.CoreV1().ConfigMaps(namespace)
}

func (c coreV1) Secrets(namespace string) kubeclient.SecretInterface {
	return c.cs.CoreV1().Secrets(namespace)
}

func (c coreV1) ServiceAccounts(namespace string) kubeclient.ServiceAccountInterface {
	return c.cs.CoreV1().ServiceAccounts(namespace)
}

func (c coreV1) Services(namespace string) kubeclient.ServiceInterface {
	return c.cs.CoreV1().Services(namespace)
}

type nodeV1 struct{ cs kubernetes.Interface }

func (c nodeV1) RuntimeClasses() kubeclient.RuntimeClassInterface {
	return c.cs.NodeV1().RuntimeClasses()
}

type coordinationV1 struct{ cs kubernetes.Interface }

func (c coordinationV1) Leases(namespace string) kubeclient.LeaseInterface {
	return c.cs.CoordinationV1().Leases(namespace)
}

type certificatesV1 struct{ cs kubernetes.Interface }

func (c certificatesV1) CertificateSigningRequests() kubeclient.CertificateSigningRequestInterface {
	return c.cs.CertificatesV1().CertificateSigningRequests()
}

type authenticationV1 struct{ cs kubernetes.Interface }

func (c authenticationV1) TokenReviews() kubeclient.TokenReviewInterface {
	return c.cs.AuthenticationV1().TokenReviews()
}

type authorizationV1 struct{ cs kubernetes.Interface }

func (c authorizationV1) SubjectAccessReviews() kubeclient.SubjectAccessReviewInterface {
	return c.cs.AuthorizationV1().SubjectAccessReviews()
}
