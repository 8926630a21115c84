package integration

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/keyutil"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// testSigner signs CertificateSigningRequests with the test cluster's CA
// (DIR/pki/ca.crt and ca.key of hack/apiserver.sh, next to the
// kubeconfig), as kube-controller-manager's csrsigning would: the test API
// server runs without a controller manager, so nothing else issues them.
type testSigner struct {
	ca  *x509.Certificate
	key crypto.Signer
}

func newTestSigner(t *testing.T, kubeconfigPath string) *testSigner {
	t.Helper()
	dir := filepath.Join(filepath.Dir(kubeconfigPath), "pki")
	crtPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Skipf("no CA of hack/apiserver.sh next to the kubeconfig to sign with: %v", err)
	}
	block, _ := pem.Decode(crtPEM)
	if block == nil {
		t.Fatal("ca.crt: no PEM")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	return &testSigner{ca: ca, key: key.(crypto.Signer)}
}

// issue approves the request, as an operator (kubectl certificate
// approve) would, and puts a certificate valid for lifetime into its
// status, as the signer would. It returns the certificate's serial.
func (s *testSigner) issue(t *testing.T, c kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest, lifetime time.Duration) *big.Int {
	t.Helper()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "TestApproval", Message: "approved by the test",
	})
	csr, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("approving %s: %v", csr.Name, err)
	}
	req, err := parseRequest(csr)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      req.Subject,
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
		NotBefore:    now,
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, req.PublicKey, s.key)
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateStatus(t.Context(), csr, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("issuing %s: %v", csr.Name, err)
	}
	return serial
}

func parseRequest(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM request", csr.Name)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	return req, req.CheckSignature()
}

// pendingRequest returns the node's kubelet-serving request not in
// seen and not issued yet.
func pendingRequest(c kubernetes.Interface, t *testing.T, nodeName string, seen map[string]bool) (*certificatesv1.CertificateSigningRequest, error) {
	list, err := c.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		csr := &list.Items[i]
		if seen[csr.Name] || csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || len(csr.Status.Certificate) > 0 {
			continue
		}
		if req, err := parseRequest(csr); err == nil && req.Subject.CommonName == "system:node:"+nodeName {
			return csr, nil
		}
	}
	return nil, errors.New("no pending kubelet-serving request of the node")
}

// servedCertificate makes a TLS handshake with addr, verifying its
// certificate against roots for serverName, and returns the certificate.
func servedCertificate(addr, serverName string, roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: serverName})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// TestNodeAPIServingCertificateCSR: with ServerTLSBootstrap the agent asks
// the cluster for its serving certificate with the kubelet's request
// (signer kubernetes.io/kubelet-serving, system:node:<name> in
// system:nodes, the node's names), serves no certificate until it is
// issued, serves the issued one, and asks for a new one before it expires
// and serves that.
func TestNodeAPIServingCertificateCSR(t *testing.T) {
	path := kubeconfig(t)
	c := newClient(t, path)
	signer := newTestSigner(t, path)
	roots := x509.NewCertPool()
	roots.AddCert(signer.ca)
	nodeName := uniqueName("csr")
	cleanupNode(t, c, nodeName)
	t.Cleanup(func() {
		list, err := c.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, csr := range list.Items {
			if req, err := parseRequest(&csr); err == nil && req.Subject.CommonName == "system:node:"+nodeName {
				_ = c.CertificatesV1().CertificateSigningRequests().Delete(t.Context(), csr.Name, metav1.DeleteOptions{})
			}
		}
	})

	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	rootDir := t.TempDir()
	srv, err := nodeserver.New(nodeserver.Options{Listener: ln, Port: ln.Addr().(*net.TCPAddr).Port, ServerTLSBootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, path),
		Runtime:        rt,
		RootDir:        rootDir,
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		NodeServer:     srv,
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 2}).WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)

	seen := map[string]bool{}
	var first *certificatesv1.CertificateSigningRequest
	eventually(t, 60*time.Second, "the node's first serving certificate request", func() (err error) {
		first, err = pendingRequest(c, t, nodeName, seen)
		return err
	})
	seen[first.Name] = true
	req, err := parseRequest(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Subject.Organization; !slices.Equal(got, []string{"system:nodes"}) {
		t.Errorf("organization %v, want [system:nodes]", got)
	}
	if !slices.Contains(req.DNSNames, nodeName) {
		t.Errorf("DNS names %v lack the node's name %s", req.DNSNames, nodeName)
	}
	if !slices.Contains(first.Spec.Usages, certificatesv1.UsageServerAuth) || !slices.Contains(first.Spec.Usages, certificatesv1.UsageDigitalSignature) {
		t.Errorf("usages %v, want server auth and digital signature", first.Spec.Usages)
	}
	if _, err := servedCertificate(addr, nodeName, roots); err == nil {
		t.Errorf("a certificate served before the request was issued")
	}

	// A short-lived first certificate: the agent renews it at 70 to 90 %
	// of its 20 s, while the test can still see it served.
	serial1 := signer.issue(t, c, first, 20*time.Second)
	eventually(t, 15*time.Second, "the issued certificate served", func() error {
		cert, err := servedCertificate(addr, nodeName, roots)
		if err != nil {
			return err
		}
		if cert.SerialNumber.Cmp(serial1) != 0 || cert.Subject.CommonName != "system:node:"+nodeName {
			return fmt.Errorf("served serial %v CN %s, want %v", cert.SerialNumber, cert.Subject.CommonName, serial1)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(rootDir, "pki", "kubelet-server-current.pem")); err != nil {
		t.Errorf("the certificate is not kept in RootDir/pki: %v", err)
	}

	var second *certificatesv1.CertificateSigningRequest
	eventually(t, 60*time.Second, "the renewal request", func() (err error) {
		second, err = pendingRequest(c, t, nodeName, seen)
		return err
	})
	serial2 := signer.issue(t, c, second, time.Hour)
	eventually(t, 30*time.Second, "the renewed certificate served", func() error {
		cert, err := servedCertificate(addr, nodeName, roots)
		if err != nil {
			return err
		}
		if cert.SerialNumber.Cmp(serial2) != 0 {
			return fmt.Errorf("served serial %v, want %v", cert.SerialNumber, serial2)
		}
		return nil
	})
}
