package bootstrap_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/kubeclient/bootstrap"
)

// fakeCluster is an API server that approves and signs every
// CertificateSigningRequest at once, with certificates of lifetime; it
// records who created each, and which client certificate each request
// presented.
type fakeCluster struct {
	t      *testing.T
	srv    *httptest.Server
	caKey  *ecdsa.PrivateKey
	ca     *x509.Certificate
	caPEM  []byte
	serial int64

	mu          sync.Mutex
	lifetime    time.Duration
	failCreates int // answer 503 to that many creates
	csrs        map[string]*certificatesv1.CertificateSigningRequest
	creators    []string // "token" or the presented certificate's CN
	presented   []*big.Int
}

func newFakeCluster(t *testing.T, lifetime time.Duration) *fakeCluster {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	c := &fakeCluster{t: t, caKey: key, ca: ca, serial: 1, lifetime: lifetime,
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		csrs:  map[string]*certificatesv1.CertificateSigningRequest{}}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(c.serve))
	c.srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	return c
}

const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"

func (c *fakeCluster) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	who := ""
	if len(r.TLS.PeerCertificates) > 0 {
		who = r.TLS.PeerCertificates[0].Subject.CommonName
		c.presented = append(c.presented, r.TLS.PeerCertificates[0].SerialNumber)
	} else if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		who = "token"
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == csrPath:
		if c.failCreates > 0 {
			c.failCreates--
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503}`, http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			c.t.Errorf("decoding a CSR: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		csr := obj.(*certificatesv1.CertificateSigningRequest)
		c.creators = append(c.creators, who)
		csr.Name = fmt.Sprintf("csr-%d", len(c.creators))
		csr.UID = types.UID(csr.Name)
		csr.ResourceVersion = "1"
		csr.Status.Certificate = c.sign(csr)
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: "True"}}
		c.csrs[csr.Name] = csr
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(csr)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, csrPath+"/"):
		csr, ok := c.csrs[strings.TrimPrefix(r.URL.Path, csrPath+"/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(csr)
	case r.URL.Path == "/api/v1/namespaces/default":
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Namespace", "apiVersion": "v1", "metadata": map[string]string{"name": "default"}})
	default:
		http.NotFound(w, r)
	}
}

func (c *fakeCluster) sign(csr *certificatesv1.CertificateSigningRequest) []byte {
	b, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		c.t.Errorf("parsing a CSR: %v", err)
		return nil
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		c.t.Errorf("signer %q", csr.Spec.SignerName)
	}
	c.serial++
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.serial), Subject: req.Subject,
		NotBefore: now.Add(-time.Second), NotAfter: now.Add(c.lifetime),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, req.PublicKey, c.caKey)
	if err != nil {
		c.t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (c *fakeCluster) bootstrapKubeconfig(t *testing.T, dir string) string {
	path := filepath.Join(dir, "bootstrap.conf")
	raw := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q, certificate-authority-data: %s}\n"+
		"users:\n- name: u\n  user: {token: abcdef.0123456789abcdef}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n",
		c.srv.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})))
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *fakeCluster) counts() (creators []string, presented []*big.Int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.creators...), append([]*big.Int(nil), c.presented...)
}

// call makes a request with cfg, as the agent's clients do.
func call(t *testing.T, cl *bootstrap.Client) error {
	client, err := kubeclient.NewForConfig(cl.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = client.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{}) // 404 is an answer
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// run starts cl.Run until the test ends.
func run(t *testing.T, cl *bootstrap.Client) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestBootstrapFirstStartAndRestart: with only a bootstrap kubeconfig the
// client requests a certificate with the token, keeps it and writes a
// kubeconfig naming it; its Config presents it. A restart reuses both and
// requests nothing.
func TestBootstrapFirstStartAndRestart(t *testing.T) {
	fc := newFakeCluster(t, time.Hour)
	dir := t.TempDir()
	opts := bootstrap.Options{NodeName: "n1", Kubeconfig: filepath.Join(dir, "kubelet.conf"),
		BootstrapKubeconfig: fc.bootstrapKubeconfig(t, dir), CertDir: filepath.Join(dir, "pki"), Rotate: true, Logger: testr.New(t)}
	cl, err := bootstrap.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := cl.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	cur := cl.Current()
	if cur == nil || cur.Leaf.Subject.CommonName != "system:node:n1" || strings.Join(cur.Leaf.Subject.Organization, ",") != "system:nodes" {
		t.Fatalf("current certificate %+v", cur)
	}
	if err := call(t, cl); err != nil {
		t.Fatal(err)
	}
	creators, presented := fc.counts()
	if strings.Join(creators, ",") != "token" {
		t.Errorf("CSRs created by %q, want one with the token", creators)
	}
	if len(presented) == 0 || presented[len(presented)-1].Cmp(cur.Leaf.SerialNumber) != 0 {
		t.Errorf("requests presented %v, want the issued certificate %v", presented, cur.Leaf.SerialNumber)
	}
	kc, err := clientcmd.LoadFromFile(opts.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		if want := filepath.Join(opts.CertDir, "kubelet-client-current.pem"); a.ClientCertificate != want || a.ClientKey != want {
			t.Errorf("kubeconfig names %q, %q, want %q", a.ClientCertificate, a.ClientKey, want)
		}
	}
	stop()

	// A restart, the bootstrap kubeconfig gone: the kept pair is used.
	if err := os.Remove(opts.BootstrapKubeconfig); err != nil {
		t.Fatal(err)
	}
	opts.BootstrapKubeconfig = ""
	cl2, err := bootstrap.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	run(t, cl2)
	if _, err := cl2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := call(t, cl2); err != nil {
		t.Fatal(err)
	}
	if creators, _ := fc.counts(); len(creators) != 1 {
		t.Errorf("CSRs after the restart: %q, want none more", creators)
	}
}

// TestBootstrapRotatesAndSurvivesOutage: while the API server answers 503
// the request is retried; a short-lived certificate is renewed with the
// node's own certificate, and the Config's requests present the new one.
func TestBootstrapRotatesAndSurvivesOutage(t *testing.T) {
	fc := newFakeCluster(t, 4*time.Second)
	fc.failCreates = 2
	dir := t.TempDir()
	cl, err := bootstrap.New(bootstrap.Options{NodeName: "n2", Kubeconfig: filepath.Join(dir, "kubelet.conf"),
		BootstrapKubeconfig: fc.bootstrapKubeconfig(t, dir), CertDir: filepath.Join(dir, "pki"), Rotate: true, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := cl.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	first := cl.Current().Leaf.SerialNumber
	// Renewed at 70 to 90 % of 4 s.
	deadline := time.Now().Add(20 * time.Second)
	for cl.Current() == nil || cl.Current().Leaf.SerialNumber.Cmp(first) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not renewed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	second := cl.Current().Leaf.SerialNumber
	if err := call(t, cl); err != nil {
		t.Fatal(err)
	}
	creators, presented := fc.counts()
	if len(creators) < 2 || creators[0] != "token" || creators[1] != "system:node:n2" {
		t.Errorf("CSRs created by %q, want the token's then the node's", creators)
	}
	if last := presented[len(presented)-1]; last.Cmp(second) != 0 && cl.Current().Leaf.SerialNumber.Cmp(last) != 0 {
		t.Errorf("the last request presented %v, want the renewed certificate %v", last, second)
	}
}

// TestBootstrapStaticKubeconfig: a valid kubeconfig that names no kept
// pair is used as it is.
func TestBootstrapStaticKubeconfig(t *testing.T) {
	fc := newFakeCluster(t, time.Hour)
	dir := t.TempDir()
	kc := fc.bootstrapKubeconfig(t, dir) // a token: valid credentials
	cl, err := bootstrap.New(bootstrap.Options{NodeName: "n3", Kubeconfig: kc, CertDir: filepath.Join(dir, "pki"), Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	run(t, cl)
	cfg, err := cl.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken == "" || cl.Current() != nil {
		t.Errorf("config %+v, current %v: want the kubeconfig's token", cfg, cl.Current())
	}
	if creators, _ := fc.counts(); len(creators) != 0 {
		t.Errorf("CSRs: %q", creators)
	}
	if _, err := bootstrap.New(bootstrap.Options{NodeName: "n", Kubeconfig: filepath.Join(dir, "none")}); err != nil {
		t.Fatal(err)
	}
	bad, _ := bootstrap.New(bootstrap.Options{NodeName: "n", Kubeconfig: filepath.Join(dir, "none")})
	if _, err := bad.Wait(t.Context()); err == nil {
		t.Error("no kubeconfig and no bootstrap kubeconfig: no error")
	}
}
