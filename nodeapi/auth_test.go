package nodeapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/nodeapi"
)

// allPaths are the node API's paths, one request each.
var allPaths = []struct{ method, path string }{
	{"GET", "/healthz"},
	{"GET", "/healthz/syncloop"},
	{"GET", "/pods"},
	{"GET", "/runningpods/"},
	{"GET", "/containerLogs/default/web/app"},
	{"POST", "/exec/default/web/app?command=ls&output=1"},
	{"POST", "/exec/default/web/uid-1/app?command=ls&output=1"},
	{"POST", "/attach/default/web/app?output=1"},
	{"POST", "/portForward/default/web"},
	{"POST", "/run/default/web/app?cmd=ls"},
	{"GET", "/stats/summary"},
	{"GET", "/metrics"},
	{"GET", "/metrics/resource"},
	{"GET", "/metrics/probes"},
	{"GET", "/logs/"},
	{"GET", "/configz"},
	{"GET", "/no/such/path"},
}

// fakeAPI answers TokenReviews (token "good" is alice, "admin" is admin,
// anything else is not authenticated) and SubjectAccessReviews (admin and
// the API server's client certificate may do anything; alice may only
// read stats), counting the calls.
type fakeAPI struct {
	client       *fake.Clientset
	tokenReviews atomic.Int32
	sars         atomic.Int32
}

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{client: fake.NewClientset()}
	f.client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		switch tr.Spec.Token {
		case "good":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}}}
		case "admin":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "admin"}}
		}
		return true, tr, nil
	})
	f.client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.sars.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		ok := ra.Resource == "nodes" && ra.Name == "node-1" && ra.Version == "v1"
		switch sar.Spec.User {
		case "admin", "kube-apiserver-kubelet-client":
		case "alice":
			ok = ok && ra.Subresource == "stats" && ra.Verb == "get"
		default:
			ok = false
		}
		sar.Status.Allowed = ok
		return true, sar, nil
	})
	return f
}

// testCA is a CA with a client certificate for the API server.
type testCA struct {
	caDER  []byte
	pool   *x509.CertPool
	client tls.Certificate
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testCA{caDER: caDER, pool: pool, client: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// TestAuthEveryPath: every path answers 401 without credentials or with a
// bad token, and 403 to a user without nodes/proxy (or the path's
// subresource); an authorized user gets past the filter.
func TestAuthEveryPath(t *testing.T) {
	f := newFixture(t)
	api := newFakeAPI()
	auth, err := nodeapi.NewDelegatingAuth(clientset.From(api.client), nodeapi.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the streaming paths answer 500 once past the filter.
	ss, err := nodeapi.NewStreamingServer(nodeapi.ExecOnlyRuntime{Runtime: f.rt}, nodeapi.StreamingServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := f.options(ss)
	opts.Auth = auth
	h, err := nodeapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range allPaths {
		t.Run(p.method+" "+p.path, func(t *testing.T) {
			for _, tc := range []struct {
				name, token string
				want        int
			}{
				{"no credentials", "", http.StatusUnauthorized},
				{"unknown token", "bad", http.StatusUnauthorized},
				{"no permission", "good", http.StatusForbidden},
			} {
				if tc.token == "good" && strings.HasPrefix(p.path, "/stats/") {
					continue // alice may read stats
				}
				req := httptest.NewRequest(p.method, p.path, nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tc.want {
					t.Errorf("%s: code %d, want %d (%s)", tc.name, rec.Code, tc.want, rec.Body)
				}
				if tc.want == http.StatusForbidden && !strings.HasPrefix(rec.Body.String(), "Forbidden (user=alice, verb=") {
					t.Errorf("%s: body %q", tc.name, rec.Body)
				}
			}
			req := httptest.NewRequest(p.method, p.path, nil)
			req.Header.Set("Authorization", "Bearer admin")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
				t.Errorf("admin: code %d (%s)", rec.Code, rec.Body)
			}
		})
	}
}

func TestAuthClientCertificate(t *testing.T) {
	api := newFakeAPI()
	ca := newTestCA(t, "kube-apiserver-kubelet-client")
	other := newTestCA(t, "kube-apiserver-kubelet-client")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	auth, err := nodeapi.NewDelegatingAuth(clientset.From(api.client), nodeapi.AuthOptions{ClientCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodeapi.NewDelegatingAuth(clientset.From(api.client), nodeapi.AuthOptions{ClientCAFile: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a missing client CA file: no error")
	}
	h, err := nodeapi.New(nodeapi.Options{NodeName: "node-1", Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		want int
	}{
		{"signed by the client CA", &ca.client, http.StatusOK},
		{"signed by another CA", &other.client, http.StatusUnauthorized},
		{"none", nil, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/healthz", nil)
			req.TLS = &tls.ConnectionState{}
			if tc.cert != nil {
				c, err := x509.ParseCertificate(tc.cert.Certificate[0])
				if err != nil {
					t.Fatal(err)
				}
				req.TLS.PeerCertificates = []*x509.Certificate{c}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("code %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
		})
	}
}

func TestAuthAnonymous(t *testing.T) {
	api := newFakeAPI()
	auth, err := nodeapi.NewDelegatingAuth(clientset.From(api.client), nodeapi.AuthOptions{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := nodeapi.New(nodeapi.Options{NodeName: "node-1", Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	// Anonymous is authenticated, then refused by authorization.
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "user=system:anonymous") {
		t.Errorf("code %d body %q, want 403 for system:anonymous", rec.Code, rec.Body)
	}
}

// TestAuthCache: TokenReview answers are reused for 2 minutes, allowed
// SubjectAccessReviews for 5 minutes and denied ones for 30 seconds.
func TestAuthCache(t *testing.T) {
	api := newFakeAPI()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	auth, err := nodeapi.NewDelegatingAuth(clientset.From(api.client), nodeapi.AuthOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	h, err := nodeapi.New(nodeapi.Options{NodeName: "node-1", Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	type counts struct{ TokenReviews, SARs int32 }
	check := func(step string, want counts) {
		t.Helper()
		got := counts{api.tokenReviews.Load(), api.sars.Load()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}
	get("/stats/summary", "good") // allowed: stats
	get("/stats/summary", "good")
	check("allowed, twice", counts{1, 1})
	get("/metrics", "good") // denied: metrics
	get("/metrics", "good")
	check("denied, twice", counts{1, 2})
	clk.SetTime(clk.Now().Add(31 * time.Second))
	get("/metrics", "good")
	get("/stats/summary", "good")
	check("after 31s: the denial expired", counts{1, 3})
	clk.SetTime(clk.Now().Add(90 * time.Second))
	get("/stats/summary", "good")
	check("after 2m1s: the token expired", counts{2, 3})
	clk.SetTime(clk.Now().Add(4 * time.Minute))
	get("/stats/summary", "good")
	check("after 6m1s: the allow expired", counts{3, 4})
}

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		verb         string
		subs         []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/statsfoo", "get", []string{"proxy"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"POST", "/checkpoint/ns/pod/c", "create", []string{"checkpoint"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz/syncloop", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/containerLogs/ns/pod/c", "get", []string{"proxy"}},
		{"POST", "/exec/ns/pod/c", "create", []string{"proxy"}},
		{"PUT", "/x", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/x", "delete", []string{"proxy"}},
		{"OPTIONS", "/x", "", []string{"proxy"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			attrs := nodeapi.RequestAttributes(&nodeapi.UserInfo{Name: "u"}, httptest.NewRequest(tc.method, tc.path, nil), "node-1")
			var subs []string
			for _, a := range attrs {
				if a.Verb != tc.verb || a.Resource != "nodes" || a.Name != "node-1" || a.APIVersion != "v1" {
					t.Errorf("attributes %+v", a)
				}
				subs = append(subs, a.Subresource)
			}
			if diff := cmp.Diff(tc.subs, subs); diff != "" {
				t.Errorf("subresources (-want +got):\n%s", diff)
			}
		})
	}
}
