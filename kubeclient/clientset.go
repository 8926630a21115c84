package kubeclient

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// NewScheme returns a new scheme holding the API group versions the
// Clientset speaks (core/v1, node.k8s.io/v1, coordination.k8s.io/v1,
// certificates.k8s.io/v1, authentication.k8s.io/v1,
// authorization.k8s.io/v1) and metav1's options. An event recorder
// (client-go's tools/record) needs one to refer to pods and nodes.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		nodev1.AddToScheme,
		coordinationv1.AddToScheme,
		certificatesv1.AddToScheme,
		authenticationv1.AddToScheme,
		authorizationv1.AddToScheme,
	} {
		// AddToScheme of a generated API package fails only on a
		// programming error (a type registered twice under two names).
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kubeclient: building the scheme: %v", err))
		}
	}
	return s
}

// Clientset is the Kubernetes API client of a nodekit agent, built on
// client-go's REST client and generic typed clients over a scheme of its
// own. It is safe for concurrent use and lives as long as its user wants;
// it holds no goroutine.
type Clientset struct {
	core           coreV1
	node           nodeV1
	coordination   coordinationV1
	certificates   certificatesV1
	authentication authenticationV1
	authorization  authorizationV1
}

var _ Interface = (*Clientset)(nil)

// NewForConfig returns a Clientset for c, as client-go's
// kubernetes.NewForConfig does: one HTTP client shared by every group
// version; c's content type (protobuf when c.ContentType is empty, as
// client-go's typed clients prefer for built-in types); and c's
// RateLimiter, else, when c.QPS > 0, a token bucket of c.QPS and c.Burst
// shared by all requests (with QPS 0, each group version's REST client
// has client-go's default bucket of 5 QPS, burst 10, as in client-go's
// clientset).
func NewForConfig(c *rest.Config) (*Clientset, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	h, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	return NewForConfigAndClient(&cfg, h)
}

// NewForConfigAndClient returns a Clientset for c that sends its requests
// through h.
func NewForConfigAndClient(c *rest.Config, h *http.Client) (*Clientset, error) {
	cfg := *c
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("kubeclient: Burst must be greater than 0 when QPS is set and RateLimiter is not")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	s := NewScheme()
	codecs := serializer.NewCodecFactory(s)
	params := &zeroParams{ParameterCodec: runtime.NewParameterCodec(s)}
	client := func(gv schema.GroupVersion) (rest.Interface, error) {
		gc := cfg
		gc.GroupVersion = &gv
		gc.APIPath = "/apis"
		if gv.Group == "" {
			gc.APIPath = "/api"
		}
		gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(s, codecs).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&gc, h)
		if err != nil {
			return nil, fmt.Errorf("kubeclient: %s: %w", gv, err)
		}
		return rc, nil
	}
	var cs Clientset
	var err error
	if cs.core.rest, err = client(corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.node.rest, err = client(nodev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.coordination.rest, err = client(coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.certificates.rest, err = client(certificatesv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.authentication.rest, err = client(authenticationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.authorization.rest, err = client(authorizationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	cs.core.params, cs.node.params, cs.coordination.params = params, params, params
	cs.certificates.params, cs.authentication.params, cs.authorization.params = params, params, params
	return &cs, nil
}

// CoreV1 implements Interface.
func (c *Clientset) CoreV1() CoreV1Interface { return c.core }

// NodeV1 implements Interface.
func (c *Clientset) NodeV1() NodeV1Interface { return c.node }

// CoordinationV1 implements Interface.
func (c *Clientset) CoordinationV1() CoordinationV1Interface { return c.coordination }

// CertificatesV1 implements Interface.
func (c *Clientset) CertificatesV1() CertificatesV1Interface { return c.certificates }

// AuthenticationV1 implements Interface.
func (c *Clientset) AuthenticationV1() AuthenticationV1Interface { return c.authentication }

// AuthorizationV1 implements Interface.
func (c *Clientset) AuthorizationV1() AuthorizationV1Interface { return c.authorization }

// group is one group version's REST client and the parameter codec of the
// Clientset's scheme.
type group struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

type coreV1 struct{ group }

func (g coreV1) Pods(namespace string) PodInterface {
	return gentype.NewClientWithList("pods", g.rest, g.params, namespace,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

func (g coreV1) Nodes() NodeInterface {
	return gentype.NewClientWithList("nodes", g.rest, g.params, "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} },
		gentype.PrefersProtobuf[*corev1.Node]())
}

func (g coreV1) Events(namespace string) EventInterface {
	return gentype.NewClientWithList("events", g.rest, g.params, namespace,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} },
		gentype.PrefersProtobuf[*corev1.Event]())
}

func (g coreV1) ConfigMaps(namespace string) ConfigMapInterface {
	return gentype.NewClientWithList("configmaps", g.rest, g.params, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} },
		gentype.PrefersProtobuf[*corev1.ConfigMap]())
}

func (g coreV1) Secrets(namespace string) SecretInterface {
	return gentype.NewClientWithList("secrets", g.rest, g.params, namespace,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} },
		gentype.PrefersProtobuf[*corev1.Secret]())
}

func (g coreV1) ServiceAccounts(namespace string) ServiceAccountInterface {
	return serviceAccounts{gentype.NewClientWithList("serviceaccounts", g.rest, g.params, namespace,
		func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
		func() *corev1.ServiceAccountList { return &corev1.ServiceAccountList{} },
		gentype.PrefersProtobuf[*corev1.ServiceAccount]()), g.params}
}

func (g coreV1) Services(namespace string) ServiceInterface {
	return gentype.NewClientWithList("services", g.rest, g.params, namespace,
		func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} },
		gentype.PrefersProtobuf[*corev1.Service]())
}

// serviceAccounts adds the token subresource, as client-go's typed
// client does it.
type serviceAccounts struct {
	*gentype.ClientWithList[*corev1.ServiceAccount, *corev1.ServiceAccountList]
	params runtime.ParameterCodec
}

// CreateToken requests a token for the ServiceAccount (POST to its token
// subresource).
func (c serviceAccounts) CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	result := &authenticationv1.TokenRequest{}
	err := c.GetClient().Post().
		UseProtobufAsDefault().
		Namespace(c.GetNamespace()).
		Resource("serviceaccounts").
		Name(serviceAccountName).
		SubResource("token").
		VersionedParams(&opts, c.params).
		Body(tokenRequest).
		Do(ctx).
		Into(result)
	return result, err
}

type nodeV1 struct{ group }

func (g nodeV1) RuntimeClasses() RuntimeClassInterface {
	return gentype.NewClientWithList("runtimeclasses", g.rest, g.params, "",
		func() *nodev1.RuntimeClass { return &nodev1.RuntimeClass{} },
		func() *nodev1.RuntimeClassList { return &nodev1.RuntimeClassList{} },
		gentype.PrefersProtobuf[*nodev1.RuntimeClass]())
}

type coordinationV1 struct{ group }

func (g coordinationV1) Leases(namespace string) LeaseInterface {
	return gentype.NewClientWithList("leases", g.rest, g.params, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

type certificatesV1 struct{ group }

func (g certificatesV1) CertificateSigningRequests() CertificateSigningRequestInterface {
	return gentype.NewClientWithList("certificatesigningrequests", g.rest, g.params, "",
		func() *certificatesv1.CertificateSigningRequest { return &certificatesv1.CertificateSigningRequest{} },
		func() *certificatesv1.CertificateSigningRequestList {
			return &certificatesv1.CertificateSigningRequestList{}
		},
		gentype.PrefersProtobuf[*certificatesv1.CertificateSigningRequest]())
}

type authenticationV1 struct{ group }

func (g authenticationV1) TokenReviews() TokenReviewInterface {
	return gentype.NewClient("tokenreviews", g.rest, g.params, "",
		func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} },
		gentype.PrefersProtobuf[*authenticationv1.TokenReview]())
}

type authorizationV1 struct{ group }

func (g authorizationV1) SubjectAccessReviews() SubjectAccessReviewInterface {
	return gentype.NewClient("subjectaccessreviews", g.rest, g.params, "",
		func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SubjectAccessReview]())
}
