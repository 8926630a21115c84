package nodeapi_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes/fake"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/nodekit/nodekit/nodeapi"
)

// client-go's typed client is a CSRClient.
var _ nodeapi.CSRClient = certificatesv1client.CertificateSigningRequestInterface(nil)

func TestRotationDeadline(t *testing.T) {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(100 * time.Hour)
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{
		{0, 70 * time.Hour},
		{0.5, 80 * time.Hour},
		{0.999999, 90 * time.Hour},
	} {
		got := nodeapi.RotationDeadline(nb, na, tc.r).Sub(nb)
		if d := got - tc.want; d < -time.Second || d > time.Second {
			t.Errorf("RotationDeadline(r=%v) = NotBefore+%v, want +%v", tc.r, got, tc.want)
		}
	}
}

func TestNewServingCertificate(t *testing.T) {
	ok := nodeapi.ServingCertificateOptions{Client: fake.NewClientset().CertificatesV1().CertificateSigningRequests(), NodeName: "n", Hostnames: []string{"n"}, CertDir: t.TempDir()}
	if _, err := nodeapi.NewServingCertificate(ok); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for name, edit := range map[string]func(*nodeapi.ServingCertificateOptions){
		"no client":    func(o *nodeapi.ServingCertificateOptions) { o.Client = nil },
		"no node name": func(o *nodeapi.ServingCertificateOptions) { o.NodeName = "" },
		"no dir":       func(o *nodeapi.ServingCertificateOptions) { o.CertDir = "" },
		"no names":     func(o *nodeapi.ServingCertificateOptions) { o.Hostnames = nil },
	} {
		o := ok
		edit(&o)
		if _, err := nodeapi.NewServingCertificate(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c, _ := nodeapi.NewServingCertificate(ok)
	if _, err := c.GetCertificate(nil); err == nil {
		t.Errorf("a certificate before Run")
	}
}

// TestServingCertificateRunStops: Run against a cluster that never issues
// the request keeps no certificate, and returns nil with no goroutine left
// when its context ends.
func TestServingCertificateRunStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := nodeapi.NewServingCertificate(nodeapi.ServingCertificateOptions{
		Client: fake.NewClientset().CertificatesV1().CertificateSigningRequests(), NodeName: "n", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, CertDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if _, err := c.GetCertificate(nil); err == nil {
		t.Errorf("a certificate that was never issued")
	}
}

// TestServerGetCertificate: with GetCertificate the server takes the
// certificate of each handshake from it, so a rotated certificate serves
// the next connection.
func TestServerGetCertificate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	certs := make([]*tls.Certificate, 2)
	for i := range certs {
		crt, key, err := nodeapi.SelfSignedCertificate([]string{"node-1"}, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		certs[i] = &c
	}
	var current atomic.Pointer[tls.Certificate]
	current.Store(certs[0])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := nodeapi.NewServer(http.NotFoundHandler(), nodeapi.ServerOptions{Listener: ln,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	addr, err := srv.Addr(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	served := func() []byte {
		conn, err := tls.Dial("tcp", addr.String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	if got := served(); string(got) != string(certs[0].Certificate[0]) {
		t.Errorf("first handshake: not the current certificate")
	}
	current.Store(certs[1])
	if got := served(); string(got) != string(certs[1].Certificate[0]) {
		t.Errorf("after the rotation: not the new certificate")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
