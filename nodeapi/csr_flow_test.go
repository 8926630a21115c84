package nodeapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/nodeapi"
)

// csrCluster is a fake API server's CertificateSigningRequests with a
// signer: the fake names each request from its generateName (as the API
// server does), and records when each was created. Made inside a synctest
// bubble, its times are the bubble's.
type csrCluster struct {
	t      *testing.T
	client *fake.Clientset
	caKey  *ecdsa.PrivateKey
	ca     *x509.Certificate

	mu      sync.Mutex
	created []createdCSR
	// createErr, when set, fails the next creations.
	createErr error
	// deny marks each new request denied (or failed) as it is created.
	deny certificatesv1.RequestConditionType
}

type createdCSR struct {
	name string
	at   time.Time
}

func newCSRCluster(t *testing.T) *csrCluster {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	c := &csrCluster{t: t, client: fake.NewClientset(), caKey: key, ca: ca}
	c.client.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.createErr != nil {
			return true, nil, c.createErr
		}
		n := len(c.created) + 1
		if csr.Name == "" {
			csr.Name = fmt.Sprintf("%s%d", csr.GenerateName, n)
		}
		csr.UID = types.UID(fmt.Sprintf("uid-%d", n))
		if c.deny != "" {
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: c.deny, Status: v1.ConditionTrue, Reason: "TestDecision", Message: "decided by the test",
			})
		}
		c.created = append(c.created, createdCSR{csr.Name, time.Now()})
		return false, nil, nil
	})
	return c
}

func (c *csrCluster) csrs() nodeapi.CSRClient {
	return c.client.CertificatesV1().CertificateSigningRequests()
}

func (c *csrCluster) requests() []createdCSR {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.created)
}

func (c *csrCluster) setCreateErr(err error) {
	c.mu.Lock()
	c.createErr = err
	c.mu.Unlock()
}

func (c *csrCluster) setDeny(cond certificatesv1.RequestConditionType) {
	c.mu.Lock()
	c.deny = cond
	c.mu.Unlock()
}

// get returns the request, parsed.
func (c *csrCluster) get(name string) (*certificatesv1.CertificateSigningRequest, *x509.CertificateRequest) {
	c.t.Helper()
	csr, err := c.csrs().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		c.t.Fatalf("%s: no PEM certificate request", name)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := req.CheckSignature(); err != nil {
		c.t.Fatal(err)
	}
	return csr, req
}

// sign makes a certificate of the CA for pub with the names given,
// valid from now for lifetime.
func (c *csrCluster) sign(subject pkix.Name, dns []string, ips []net.IP, pub any, lifetime time.Duration) *x509.Certificate {
	c.t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		c.t.Fatal(err)
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: subject, DNSNames: dns, IPAddresses: ips,
		NotBefore: now, NotAfter: now.Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, c.ca, pub, c.caKey)
	if err != nil {
		c.t.Fatal(err)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		c.t.Fatal(err)
	}
	return crt
}

// issue approves request name and issues a certificate for its names
// (edited by edit, when given), valid from now for lifetime, as an
// approver and kube-controller-manager's signer would.
func (c *csrCluster) issue(name string, lifetime time.Duration, edit func(*x509.CertificateRequest)) *x509.Certificate {
	c.t.Helper()
	csr, req := c.get(name)
	if edit != nil {
		edit(req)
	}
	crt := c.sign(req.Subject, req.DNSNames, req.IPAddresses, req.PublicKey, lifetime)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "TestApproval",
	})
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: crt.Raw})
	if _, err := c.csrs().(interface {
		UpdateStatus(context.Context, *certificatesv1.CertificateSigningRequest, metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error)
	}).UpdateStatus(context.Background(), csr, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return crt
}

// keep writes a pair for the names, valid from now for lifetime, in dir
// as the kubelet's store keeps it.
func (c *csrCluster) keep(dir string, subject pkix.Name, dns []string, ips []net.IP, lifetime time.Duration) *x509.Certificate {
	c.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	crt := c.sign(subject, dns, ips, &key.PublicKey, lifetime)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: crt.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	dated := filepath.Join(dir, "kubelet-server-1999-12-31-00-00-00.pem")
	if err := os.WriteFile(dated, data, 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Symlink(dated, filepath.Join(dir, "kubelet-server-current.pem")); err != nil {
		c.t.Fatal(err)
	}
	return crt
}

var (
	testNode    = "node-1"
	testSubject = pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}}
	testDNS     = []string{"node-1", "node-1.example"}
	testIPs     = []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("fd00::7")}
)

// startServing runs a ServingCertificate for the test node in dir until
// the test ends (which waits for Run to return nil).
func startServing(t *testing.T, c *csrCluster, dir string) *nodeapi.ServingCertificate {
	t.Helper()
	sc, err := nodeapi.NewServingCertificate(nodeapi.ServingCertificateOptions{
		Client: c.csrs(), NodeName: testNode, Hostnames: testDNS, IPs: testIPs, CertDir: dir,
		Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 2}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return sc
}

// served is the serial of the certificate GetCertificate gives; nil with
// none.
func served(sc *nodeapi.ServingCertificate) *big.Int {
	c, err := sc.GetCertificate(nil)
	if err != nil {
		return nil
	}
	return c.Leaf.SerialNumber
}

// TestServingCertificateFirstRequest: with nothing kept, Run requests a
// certificate at once with the kubelet's request, serves none until it is
// issued, then serves the issued one and keeps it in CertDir as the
// kubelet's store does.
func TestServingCertificateFirstRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCSRCluster(t)
		dir := t.TempDir()
		sc := startServing(t, c, dir)
		synctest.Wait()
		reqs := c.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests, want 1", len(reqs))
		}
		csr, req := c.get(reqs[0].name)
		if !strings.HasPrefix(csr.Name, "csr-") {
			t.Errorf("request name %q, want generated from csr-", csr.Name)
		}
		if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
			t.Errorf("signer %q", csr.Spec.SignerName)
		}
		if want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}; !slices.Equal(csr.Spec.Usages, want) {
			t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
		}
		if csr.Spec.ExpirationSeconds != nil {
			t.Errorf("expirationSeconds %d, want none (the signer's default)", *csr.Spec.ExpirationSeconds)
		}
		if req.Subject.CommonName != testSubject.CommonName || !slices.Equal(req.Subject.Organization, testSubject.Organization) {
			t.Errorf("subject %v, want %v", req.Subject, testSubject)
		}
		if !slices.Equal(req.DNSNames, testDNS) {
			t.Errorf("DNS names %v, want %v", req.DNSNames, testDNS)
		}
		if len(req.IPAddresses) != len(testIPs) || !req.IPAddresses[0].Equal(testIPs[0]) || !req.IPAddresses[1].Equal(testIPs[1]) {
			t.Errorf("IPs %v, want %v", req.IPAddresses, testIPs)
		}
		if k, ok := req.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("key %T, want ECDSA P-256", req.PublicKey)
		}
		if _, err := sc.GetCertificate(nil); err == nil {
			t.Errorf("a certificate before the request is issued")
		}

		time.Sleep(time.Minute) // approval takes a while
		crt := c.issue(reqs[0].name, 24*time.Hour, nil)
		synctest.Wait()
		if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
			t.Fatalf("served serial %v, want the issued %v", got, crt.SerialNumber)
		}
		if n := len(c.requests()); n != 1 {
			t.Errorf("%d requests after the issuance, want 1", n)
		}

		// The store: kubelet-server-current.pem links to the dated file,
		// which holds the certificate and its key.
		current := filepath.Join(dir, "kubelet-server-current.pem")
		target, err := os.Readlink(current)
		if err != nil {
			t.Fatalf("kubelet-server-current.pem is not a link: %v", err)
		}
		if want := filepath.Join(dir, "kubelet-server-"+time.Now().Format("2006-01-02-15-04-05")+".pem"); target != want {
			t.Errorf("current links to %s, want %s", target, want)
		}
		if fi, err := os.Stat(target); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("the kept pair's mode %v, want 0600", fi.Mode().Perm())
		}
		pair, err := tls.LoadX509KeyPair(current, current)
		if err != nil {
			t.Fatalf("the kept pair does not load: %v", err)
		}
		if pair.Leaf.SerialNumber.Cmp(crt.SerialNumber) != 0 {
			t.Errorf("kept serial %v, want %v", pair.Leaf.SerialNumber, crt.SerialNumber)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 {
			t.Errorf("CertDir holds %d entries, want the dated pair and the link", len(entries))
		}
	})
}

// TestServingCertificateReusesKeptPair: a valid pair kept in CertDir with
// every name is served at once, and no request is made before its
// rotation deadline; a new one is requested between 70 and 90 % of its
// lifetime, and the kept one is served until the new one is issued.
func TestServingCertificateReusesKeptPair(t *testing.T) {
	const lifetime = 100 * time.Hour
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCSRCluster(t)
				dir := t.TempDir()
				kept := c.keep(dir, testSubject, testDNS, testIPs, lifetime)
				sc := startServing(t, c, dir)
				synctest.Wait()
				if got := served(sc); got == nil || got.Cmp(kept.SerialNumber) != 0 {
					t.Fatalf("served %v, want the kept %v", got, kept.SerialNumber)
				}
				time.Sleep(70*lifetime/100 - time.Second)
				synctest.Wait()
				if n := len(c.requests()); n != 0 {
					t.Fatalf("%d requests before 70 %% of the lifetime", n)
				}
				waitRequests(t, c, 1, time.Minute, 20*lifetime/100+time.Minute)
				reqs := c.requests()
				if len(reqs) != 1 {
					t.Fatalf("%d requests by 90 %% of the lifetime, want 1", len(reqs))
				}
				at := reqs[0].at.Sub(kept.NotBefore)
				if at < 70*lifetime/100 || at > 90*lifetime/100 {
					t.Errorf("requested at %v of %v", at, lifetime)
				}
				if got := served(sc); got == nil || got.Cmp(kept.SerialNumber) != 0 {
					t.Errorf("served %v while the renewal waits, want the kept %v", got, kept.SerialNumber)
				}
				crt := c.issue(reqs[0].name, lifetime, nil)
				synctest.Wait()
				if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
					t.Errorf("served %v, want the renewed %v", got, crt.SerialNumber)
				}
			})
		})
	}
}

// TestServingCertificateRenewsKept: a kept pair that expired, or that
// lacks a name of the request (the node's names changed), is replaced at
// once; one that lacks a name is served until then, an expired one is
// not.
func TestServingCertificateRenewsKept(t *testing.T) {
	for _, tc := range []struct {
		name     string
		subject  pkix.Name
		dns      []string
		ips      []net.IP
		lifetime time.Duration
		age      time.Duration // from its NotBefore when Run starts
		served   bool
	}{
		{"expired", testSubject, testDNS, testIPs, time.Hour, 2 * time.Hour, false},
		{"new IP", testSubject, testDNS, testIPs[:1], 24 * time.Hour, 0, true},
		{"new host name", testSubject, testDNS[:1], testIPs, 24 * time.Hour, 0, true},
		{"other node", pkix.Name{CommonName: "system:node:node-0", Organization: []string{"system:nodes"}}, testDNS, testIPs, 24 * time.Hour, 0, true},
		{"no organization", pkix.Name{CommonName: "system:node:node-1"}, testDNS, testIPs, 24 * time.Hour, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCSRCluster(t)
				dir := t.TempDir()
				kept := c.keep(dir, tc.subject, tc.dns, tc.ips, tc.lifetime)
				time.Sleep(tc.age)
				sc := startServing(t, c, dir)
				synctest.Wait()
				reqs := c.requests()
				if len(reqs) != 1 {
					t.Fatalf("%d requests, want 1 at once", len(reqs))
				}
				got := served(sc)
				if tc.served && (got == nil || got.Cmp(kept.SerialNumber) != 0) {
					t.Errorf("served %v, want the kept %v until the new one", got, kept.SerialNumber)
				}
				if !tc.served && got != nil {
					t.Errorf("served %v, want none", got)
				}
				crt := c.issue(reqs[0].name, 24*time.Hour, nil)
				synctest.Wait()
				if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
					t.Errorf("served %v, want the new %v", got, crt.SerialNumber)
				}
				time.Sleep(time.Hour)
				synctest.Wait()
				if n := len(c.requests()); n != 1 {
					t.Errorf("%d requests an hour after the new certificate, want 1", n)
				}
			})
		})
	}
}

// wantGaps checks the times between successive requests against the
// certificate manager's back-off: 2, 4, 8, 16 s up to 10 % longer, then
// 32 s.
func wantGaps(t *testing.T, reqs []createdCSR, from time.Duration) {
	t.Helper()
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 32 * time.Second}
	if len(reqs) < len(want)+1 {
		t.Fatalf("%d requests, want at least %d", len(reqs), len(want)+1)
	}
	for i, w := range want {
		gap := reqs[i+1].at.Sub(reqs[i].at)
		if i == 0 {
			gap -= from
		}
		hi := w + w/10
		if w == 32*time.Second {
			hi = w
		}
		if gap < w || gap > hi {
			t.Errorf("request %d came %v after the previous one, want %v to %v", i+2, gap, w, hi)
		}
	}
}

// TestServingCertificateDenied: a denied or failed request is an error,
// logged, and a new one is made after the back-off; once one is issued it
// is served.
func TestServingCertificateDenied(t *testing.T) {
	for _, cond := range []certificatesv1.RequestConditionType{certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		t.Run(string(cond), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCSRCluster(t)
				c.setDeny(cond)
				sc := startServing(t, c, t.TempDir())
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				reqs := c.requests()
				wantGaps(t, reqs, 0)
				if served(sc) != nil {
					t.Errorf("a certificate served from %s requests", cond)
				}
				c.setDeny("")
				time.Sleep(32 * time.Second)
				synctest.Wait()
				reqs = c.requests()
				crt := c.issue(reqs[len(reqs)-1].name, time.Hour, nil)
				synctest.Wait()
				if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
					t.Errorf("served %v, want %v", got, crt.SerialNumber)
				}
			})
		})
	}
}

// TestServingCertificateAPIErrors: requests the API server refuses are
// made again after the back-off, which starts over once one is issued.
func TestServingCertificateAPIErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCSRCluster(t)
		var attempts []createdCSR
		c.client.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
			c.mu.Lock()
			if c.createErr != nil {
				attempts = append(attempts, createdCSR{at: time.Now()})
			}
			c.mu.Unlock()
			return false, nil, nil
		})
		c.setCreateErr(apierrors.NewInternalError(fmt.Errorf("etcd is away")))
		sc := startServing(t, c, t.TempDir())
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		c.mu.Lock()
		got := slices.Clone(attempts)
		c.mu.Unlock()
		wantGaps(t, got, 0)

		c.setCreateErr(nil)
		time.Sleep(32 * time.Second)
		synctest.Wait()
		reqs := c.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests once the API server accepts them, want 1", len(reqs))
		}
		crt := c.issue(reqs[0].name, 100*time.Second, nil)
		synctest.Wait()
		if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
			t.Fatalf("served %v, want %v", got, crt.SerialNumber)
		}

		// The renewal at 70 to 90 s meets refusals again: the back-off
		// starts at 2 s.
		c.setCreateErr(apierrors.NewTooManyRequests("slow down", 1))
		c.mu.Lock()
		attempts = nil
		c.mu.Unlock()
		time.Sleep(90*time.Second + 2*time.Minute)
		synctest.Wait()
		c.mu.Lock()
		got = slices.Clone(attempts)
		c.mu.Unlock()
		wantGaps(t, got, 0)
		// The certificate expired meanwhile: none is served.
		if _, err := sc.GetCertificate(nil); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("GetCertificate after the expiry: %v, want an expiry error", err)
		}
	})
}

// TestServingCertificateNotIssuedInTime: a request neither issued nor
// refused within 15 minutes is given up, and a new one (another key) made
// after the back-off.
func TestServingCertificateNotIssuedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCSRCluster(t)
		startServing(t, c, t.TempDir())
		time.Sleep(15*time.Minute - time.Second)
		synctest.Wait()
		if n := len(c.requests()); n != 1 {
			t.Fatalf("%d requests within 15 minutes, want 1", n)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		reqs := c.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests after 15 minutes and the back-off, want 2", len(reqs))
		}
		if gap := reqs[1].at.Sub(reqs[0].at); gap < 15*time.Minute+2*time.Second || gap > 15*time.Minute+2200*time.Millisecond {
			t.Errorf("second request %v after the first, want 15 min + 2 to 2.2 s", gap)
		}
		_, r0 := c.get(reqs[0].name)
		_, r1 := c.get(reqs[1].name)
		if r0.PublicKey.(*ecdsa.PublicKey).Equal(r1.PublicKey) {
			t.Errorf("the second request is for the same key")
		}
	})
}

// TestServingCertificateRequestDeleted: a request deleted while it waits
// is given up and made again after the back-off.
func TestServingCertificateRequestDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCSRCluster(t)
		sc := startServing(t, c, t.TempDir())
		synctest.Wait()
		reqs := c.requests()
		if err := c.csrs().(interface {
			Delete(context.Context, string, metav1.DeleteOptions) error
		}).Delete(context.Background(), reqs[0].name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		reqs = c.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want a second one after the deletion", len(reqs))
		}
		crt := c.issue(reqs[1].name, time.Hour, nil)
		synctest.Wait()
		if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
			t.Errorf("served %v, want %v", got, crt.SerialNumber)
		}
	})
}

// TestServingCertificateWatchEnds: when the API server ends the watch
// (as it does every few minutes) or reports an error on it, the request
// is read and watched again, and its issuance meanwhile is seen.
func TestServingCertificateWatchEnds(t *testing.T) {
	for _, end := range []string{"closed", "error"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCSRCluster(t)
				first := watch.NewFake()
				var watches int
				c.client.PrependWatchReactor("certificatesigningrequests", func(k8stesting.Action) (bool, watch.Interface, error) {
					c.mu.Lock()
					defer c.mu.Unlock()
					watches++
					if watches == 1 {
						return true, first, nil
					}
					return false, nil, nil
				})
				sc := startServing(t, c, t.TempDir())
				synctest.Wait()
				// Issued while the watch sees nothing of it.
				crt := c.issue(c.requests()[0].name, time.Hour, nil)
				synctest.Wait()
				if served(sc) != nil {
					t.Fatalf("served before the watch ended")
				}
				if end == "closed" {
					first.Stop()
				} else {
					first.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
				}
				synctest.Wait()
				if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
					t.Errorf("served %v, want %v", got, crt.SerialNumber)
				}
				if n := len(c.requests()); n != 1 {
					t.Errorf("%d requests, want 1", n)
				}
			})
		})
	}
}

// TestServingCertificateUnusableIssued: a certificate issued without a
// name of the request is served, but the next request waits for the
// back-off rather than following at once.
func TestServingCertificateUnusableIssued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCSRCluster(t)
		sc := startServing(t, c, t.TempDir())
		synctest.Wait()
		crt := c.issue(c.requests()[0].name, time.Hour, func(r *x509.CertificateRequest) { r.IPAddresses = nil })
		synctest.Wait()
		if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
			t.Errorf("served %v, want the issued %v", got, crt.SerialNumber)
		}
		if n := len(c.requests()); n != 1 {
			t.Errorf("%d requests right after the issuance, want 1", n)
		}
		time.Sleep(1999 * time.Millisecond)
		synctest.Wait()
		if n := len(c.requests()); n != 1 {
			t.Errorf("%d requests before the back-off of 2 s, want 1", n)
		}
		time.Sleep(201 * time.Millisecond)
		synctest.Wait()
		if n := len(c.requests()); n != 2 {
			t.Errorf("%d requests after the back-off, want 2", n)
		}
	})
}

// waitRequests waits, in the bubble's time, up to max for n requests,
// looking each step.
func waitRequests(t *testing.T, c *csrCluster, n int, step, max time.Duration) {
	t.Helper()
	for waited := time.Duration(0); ; waited += step {
		synctest.Wait()
		if len(c.requests()) >= n {
			return
		}
		if waited > max {
			t.Fatalf("%d requests after %v, want %d", len(c.requests()), max, n)
		}
		time.Sleep(step)
	}
}

// TestServingCertificateConcurrentGet: handshakes take the certificate
// while it rotates (run with -race).
func TestServingCertificateConcurrentGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCSRCluster(t)
		sc := startServing(t, c, t.TempDir())
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
						_, _ = sc.GetCertificate(nil)
					}
				}
			})
		}
		var last *x509.Certificate
		for i := range 5 {
			waitRequests(t, c, i+1, time.Second, 10*time.Minute)
			last = c.issue(c.requests()[i].name, 2*time.Minute, nil)
		}
		synctest.Wait()
		close(stop)
		wg.Wait()
		if got := served(sc); got == nil || got.Cmp(last.SerialNumber) != 0 {
			t.Errorf("served %v, want the last issued %v", got, last.SerialNumber)
		}
		if n := len(c.requests()); n != 5 {
			t.Errorf("%d requests, want 5", n)
		}
	})
}

// TestServingCertificateKeptLayouts: the pair is found where the
// kubelet's store leaves it: behind kubelet-server-updated.pem when an
// update was cut short before the rename, or as kubelet-server.crt and
// kubelet-server.key; a kept pair that does not load is replaced, and Run
// goes on.
func TestServingCertificateKeptLayouts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arrange func(t *testing.T, dir string)
		reused  bool
	}{
		{"updated link", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "kubelet-server-current.pem"), filepath.Join(dir, "kubelet-server-updated.pem")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"crt and key", func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(dir, "kubelet-server-current.pem"))
			if err != nil {
				t.Fatal(err)
			}
			crt, rest := pem.Decode(data)
			key, _ := pem.Decode(rest)
			if err := os.WriteFile(filepath.Join(dir, "kubelet-server.crt"), pem.EncodeToMemory(crt), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "kubelet-server.key"), pem.EncodeToMemory(key), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, "kubelet-server-current.pem")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"corrupt", func(t *testing.T, dir string) {
			target, err := os.Readlink(filepath.Join(dir, "kubelet-server-current.pem"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"current is a file", func(t *testing.T, dir string) {
			current := filepath.Join(dir, "kubelet-server-current.pem")
			if err := os.Remove(current); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(current, []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCSRCluster(t)
				dir := t.TempDir()
				kept := c.keep(dir, testSubject, testDNS, testIPs, 24*time.Hour)
				tc.arrange(t, dir)
				sc := startServing(t, c, dir)
				synctest.Wait()
				got, n := served(sc), len(c.requests())
				if tc.reused {
					if got == nil || got.Cmp(kept.SerialNumber) != 0 || n != 0 {
						t.Fatalf("served %v with %d requests, want the kept %v and none", got, n, kept.SerialNumber)
					}
					return
				}
				if got != nil || n != 1 {
					t.Fatalf("served %v with %d requests, want none and 1", got, n)
				}
				crt := c.issue(c.requests()[0].name, time.Hour, nil)
				synctest.Wait()
				if got := served(sc); got == nil || got.Cmp(crt.SerialNumber) != 0 {
					t.Errorf("served %v, want %v", got, crt.SerialNumber)
				}
				pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "kubelet-server-current.pem"), filepath.Join(dir, "kubelet-server-current.pem"))
				if err != nil || pair.Leaf.SerialNumber.Cmp(crt.SerialNumber) != 0 {
					t.Errorf("kept after the replacement: %v", err)
				}
			})
		})
	}
}
