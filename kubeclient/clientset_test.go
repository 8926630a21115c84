package kubeclient_test

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/kubeclient"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// request is what the fake API server saw.
type request struct {
	method, path, query, contentType, accept string
	body                                     []byte
}

// fakeServer answers every request with the object reply returns for its
// path, encoded as the request's Accept header asks.
type fakeServer struct {
	t      *testing.T
	codecs serializer.CodecFactory
	mu     sync.Mutex
	reqs   []request
	reply  runtime.Object
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), body})
	reply := s.reply
	s.mu.Unlock()
	mt := "application/json"
	if accept, _, _ := mime.ParseMediaType(r.Header.Get("Accept")); accept == protobuf {
		mt = protobuf
	}
	info, ok := runtime.SerializerInfoForMediaType(s.codecs.SupportedMediaTypes(), mt)
	if !ok {
		s.t.Errorf("no serializer for %s", mt)
		return
	}
	enc := s.codecs.EncoderForVersion(info.Serializer, reply.GetObjectKind().GroupVersionKind().GroupVersion())
	w.Header().Set("Content-Type", mt)
	if err := enc.Encode(reply, w); err != nil {
		s.t.Errorf("encoding: %v", err)
	}
}

func (s *fakeServer) last() request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

func (s *fakeServer) set(o runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = o
}

func withKind(o runtime.Object, gv, kind string) runtime.Object {
	g, err := schema.ParseGroupVersion(gv)
	if err != nil {
		panic(err)
	}
	o.GetObjectKind().SetGroupVersionKind(g.WithKind(kind))
	return o
}

// TestClientset sends each call nodekit makes through a Clientset, in JSON
// and in protobuf, and checks the request (verb, path, subresource,
// content type) and the decoded reply.
func TestClientset(t *testing.T) {
	for _, contentType := range []string{"", "application/json", protobuf} {
		t.Run("contentType="+contentType, func(t *testing.T) {
			srv := &fakeServer{t: t, codecs: serializer.NewCodecFactory(kubeclient.NewScheme())}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			cs, err := kubeclient.NewForConfig(&rest.Config{Host: hs.URL, ContentConfig: rest.ContentConfig{ContentType: contentType}, QPS: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			wantBody := contentType
			if wantBody == "" {
				wantBody = protobuf // the generated clients prefer protobuf for built-in types
			}
			pod := withKind(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, "v1", "Pod").(*corev1.Pod)
			type call struct {
				name, method, path string
				reply              runtime.Object
				do                 func(context.Context) (metav1.Object, error)
				sendsBody          bool
			}
			calls := []call{
				{"pod get", "GET", "/api/v1/namespaces/ns/pods/p", pod, func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
				}, false},
				{"pod create", "POST", "/api/v1/namespaces/ns/pods", pod, func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
				}, true},
				{"pod status patch", "PATCH", "/api/v1/namespaces/ns/pods/p/status", pod, func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Pods("ns").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
				}, false},
				{"pod delete", "DELETE", "/api/v1/namespaces/ns/pods/p", withKind(&metav1.Status{Status: metav1.StatusSuccess}, "v1", "Status"), func(ctx context.Context) (metav1.Object, error) {
					return pod, cs.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{})
				}, false},
				{"pod list", "GET", "/api/v1/pods", withKind(&corev1.PodList{Items: []corev1.Pod{*pod}}, "v1", "PodList"), func(ctx context.Context) (metav1.Object, error) {
					l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n"})
					if err != nil {
						return nil, err
					}
					return &l.Items[0], nil
				}, false},
				{"node status patch", "PATCH", "/api/v1/nodes/n/status", withKind(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "v1", "Node"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Nodes().Patch(ctx, "n", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
				}, false},
				{"event create", "POST", "/api/v1/namespaces/ns/events", withKind(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, "v1", "Event"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Events("ns").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}, metav1.CreateOptions{})
				}, true},
				{"event update", "PUT", "/api/v1/namespaces/ns/events/e", withKind(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, "v1", "Event"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Events("ns").Update(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}, metav1.UpdateOptions{})
				}, true},
				{"configmap get", "GET", "/api/v1/namespaces/ns/configmaps/c", withKind(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, "v1", "ConfigMap"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().ConfigMaps("ns").Get(ctx, "c", metav1.GetOptions{})
				}, false},
				{"secret get", "GET", "/api/v1/namespaces/ns/secrets/s", withKind(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, "v1", "Secret"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
				}, false},
				{"serviceaccount token", "POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", withKind(&authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "sa"}, Status: authenticationv1.TokenRequestStatus{Token: "t"}}, "authentication.k8s.io/v1", "TokenRequest"), func(ctx context.Context) (metav1.Object, error) {
					tr, err := cs.CoreV1().ServiceAccounts("ns").CreateToken(ctx, "sa", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
					if err == nil && tr.Status.Token != "t" {
						t.Errorf("token %q, want t", tr.Status.Token)
					}
					return tr, err
				}, true},
				{"service list", "GET", "/api/v1/services", withKind(&corev1.ServiceList{Items: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "svc"}}}}, "v1", "ServiceList"), func(ctx context.Context) (metav1.Object, error) {
					l, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
					if err != nil {
						return nil, err
					}
					return &l.Items[0], nil
				}, false},
				{"runtimeclass list", "GET", "/apis/node.k8s.io/v1/runtimeclasses", withKind(&nodev1.RuntimeClassList{Items: []nodev1.RuntimeClass{{ObjectMeta: metav1.ObjectMeta{Name: "rc"}}}}, "node.k8s.io/v1", "RuntimeClassList"), func(ctx context.Context) (metav1.Object, error) {
					l, err := cs.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{})
					if err != nil {
						return nil, err
					}
					return &l.Items[0], nil
				}, false},
				{"lease update", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", withKind(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "coordination.k8s.io/v1", "Lease"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CoordinationV1().Leases("kube-node-lease").Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.UpdateOptions{})
				}, true},
				{"csr create", "POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", withKind(&certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr"}}, "certificates.k8s.io/v1", "CertificateSigningRequest"), func(ctx context.Context) (metav1.Object, error) {
					return cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr"}}, metav1.CreateOptions{})
				}, true},
				{"tokenreview", "POST", "/apis/authentication.k8s.io/v1/tokenreviews", withKind(&authenticationv1.TokenReview{ObjectMeta: metav1.ObjectMeta{Name: "tr"}}, "authentication.k8s.io/v1", "TokenReview"), func(ctx context.Context) (metav1.Object, error) {
					return cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{ObjectMeta: metav1.ObjectMeta{Name: "tr"}}, metav1.CreateOptions{})
				}, true},
				{"subjectaccessreview", "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", withKind(&authorizationv1.SubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Name: "sar"}}, "authorization.k8s.io/v1", "SubjectAccessReview"), func(ctx context.Context) (metav1.Object, error) {
					return cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Name: "sar"}}, metav1.CreateOptions{})
				}, true},
			}
			for _, c := range calls {
				srv.set(c.reply)
				got, err := c.do(ctx)
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					continue
				}
				if m, ok := c.reply.(metav1.Object); ok && got.GetName() != m.GetName() {
					t.Errorf("%s: decoded name %q, want %q", c.name, got.GetName(), m.GetName())
				}
				r := srv.last()
				if r.method != c.method || r.path != c.path {
					t.Errorf("%s: sent %s %s, want %s %s", c.name, r.method, r.path, c.method, c.path)
				}
				if c.sendsBody && r.contentType != wantBody {
					t.Errorf("%s: body content type %q, want %q", c.name, r.contentType, wantBody)
				}
			}
			if r := srv.reqs[4]; r.query != "fieldSelector=spec.nodeName%3Dn" {
				t.Errorf("pod list query %q, want the field selector", r.query)
			}
		})
	}
}

// TestNewForConfigBurst checks the rate limiter's configuration as
// client-go's NewForConfig does: a QPS without a Burst is an error.
func TestNewForConfigBurst(t *testing.T) {
	if _, err := kubeclient.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5}); err == nil {
		t.Error("QPS 5, Burst 0: no error")
	}
	if _, err := kubeclient.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10}); err != nil {
		t.Errorf("QPS 5, Burst 10: %v", err)
	}
}

// TestNewScheme checks that the scheme knows the objects events refer to
// and nothing of the groups the agent does not call.
func TestNewScheme(t *testing.T) {
	s := kubeclient.NewScheme()
	for _, o := range []runtime.Object{&corev1.Pod{}, &corev1.Node{}, &coordinationv1.Lease{}, &nodev1.RuntimeClass{}} {
		if _, _, err := s.ObjectKinds(o); err != nil {
			t.Errorf("%T: %v", o, err)
		}
	}
	if n := len(s.AllKnownTypes()); n == 0 {
		t.Error("empty scheme")
	}
	for gvk := range s.AllKnownTypes() {
		switch gvk.Group {
		case "", "node.k8s.io", "coordination.k8s.io", "certificates.k8s.io", "authentication.k8s.io", "authorization.k8s.io":
		default:
			t.Errorf("unexpected group version kind %v", gvk)
		}
	}
	if !s.IsVersionRegistered(corev1.SchemeGroupVersion) {
		t.Error("core/v1 not registered")
	}
}
