package kubeclient

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is the Kubernetes API client a nodekit agent uses: one accessor
// per API group version it calls. *Clientset implements it, and so does
// clientset.From over a client-go kubernetes.Interface.
type Interface interface {
	CoreV1() CoreV1Interface
	NodeV1() NodeV1Interface
	CoordinationV1() CoordinationV1Interface
	CertificatesV1() CertificatesV1Interface
	AuthenticationV1() AuthenticationV1Interface
	AuthorizationV1() AuthorizationV1Interface
}

// CoreV1Interface holds the core/v1 resources nodekit calls.
type CoreV1Interface interface {
	Pods(namespace string) PodInterface
	Nodes() NodeInterface
	Events(namespace string) EventInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Secrets(namespace string) SecretInterface
	ServiceAccounts(namespace string) ServiceAccountInterface
	Services(namespace string) ServiceInterface
}

// NodeV1Interface holds the node.k8s.io/v1 resources nodekit calls.
type NodeV1Interface interface {
	RuntimeClasses() RuntimeClassInterface
}

// CoordinationV1Interface holds the coordination.k8s.io/v1 resources
// nodekit calls.
type CoordinationV1Interface interface {
	Leases(namespace string) LeaseInterface
}

// CertificatesV1Interface holds the certificates.k8s.io/v1 resources
// nodekit calls.
type CertificatesV1Interface interface {
	CertificateSigningRequests() CertificateSigningRequestInterface
}

// AuthenticationV1Interface holds the authentication.k8s.io/v1 resources
// nodekit calls.
type AuthenticationV1Interface interface {
	TokenReviews() TokenReviewInterface
}

// AuthorizationV1Interface holds the authorization.k8s.io/v1 resources
// nodekit calls.
type AuthorizationV1Interface interface {
	SubjectAccessReviews() SubjectAccessReviewInterface
}

// PodInterface is what nodekit calls on pods: the API source lists and
// watches them, the status manager reads, patches (status subresource)
// and deletes them, the mirror manager creates, lists and deletes mirror
// pods.
type PodInterface interface {
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (result *corev1.Pod, err error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// NodeInterface is what nodekit calls on nodes: registration, reads and
// status patches.
type NodeInterface interface {
	Create(ctx context.Context, node *corev1.Node, opts metav1.CreateOptions) (*corev1.Node, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (result *corev1.Node, err error)
}

// EventInterface is what the agent's event sink calls.
type EventInterface interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Update(ctx context.Context, event *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (result *corev1.Event, err error)
}

// ConfigMapInterface reads ConfigMaps (volumes, environment, the node
// API's client CA).
type ConfigMapInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
}

// SecretInterface reads Secrets (volumes, environment, image pull
// secrets).
type SecretInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
}

// ServiceAccountInterface reads ServiceAccounts and requests their tokens
// (projected volumes, image pull credentials).
type ServiceAccountInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ServiceAccount, error)
	CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// ServiceInterface lists and watches Services (the containers' service
// link variables).
type ServiceInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// RuntimeClassInterface lists and watches RuntimeClasses.
type RuntimeClassInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*nodev1.RuntimeClassList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// LeaseInterface is what the node Lease loop calls.
type LeaseInterface interface {
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// CertificateSigningRequestInterface is what the serving certificate's
// flow calls: it creates a request, reads it, and waits for its
// certificate with a list and watch.
type CertificateSigningRequestInterface interface {
	Create(ctx context.Context, certificateSigningRequest *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// TokenReviewInterface creates TokenReviews (the node API's bearer
// token authentication).
type TokenReviewInterface interface {
	Create(ctx context.Context, tokenReview *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// SubjectAccessReviewInterface creates SubjectAccessReviews (the node
// API's authorization).
type SubjectAccessReviewInterface interface {
	Create(ctx context.Context, subjectAccessReview *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}
