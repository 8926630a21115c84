package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"
)

// ServingCertificateOptions configure a ServingCertificate.
type ServingCertificateOptions struct {
	// Client creates the CertificateSigningRequests and watches them.
	// Required.
	Client kubernetes.Interface
	// NodeName names the certificate: common name system:node:<name>,
	// organization system:nodes, as the kubelet's. Required.
	NodeName string
	// Hostnames and IPs are the certificate's subject alternative names
	// (the node's addresses). At least one is required.
	Hostnames []string
	IPs       []net.IP
	// CertDir keeps the key and certificate
	// (kubelet-server-current.pem, a link to the latest
	// kubelet-server-<date>.pem), as the kubelet's. Required.
	CertDir string
	// Clock times the rotations. Defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
}

// ServingCertificate is the node API's serving certificate obtained from
// the cluster, as the kubelet's with serverTLSBootstrap (or
// --rotate-server-certificates): a CertificateSigningRequest of signer
// kubernetes.io/kubelet-serving for a new key, through client-go's
// certificate manager, which keeps the pair in CertDir. Run requests one
// when CertDir has none valid (or it lacks a name of the template), and a
// new one at a random point between 70 and 90 % of the certificate's
// lifetime, as the manager does. The cluster must approve the requests
// (Kubernetes does not approve this signer by itself: an operator or an
// approving controller does) and sign them (kube-controller-manager's
// csrsigning, for this signer).
//
// GetCertificate gives the current certificate to each TLS handshake
// (ServerOptions.GetCertificate). It is safe for concurrent use; Run is
// called once.
type ServingCertificate struct {
	opts ServingCertificateOptions
	log  logr.Logger

	mu      sync.Mutex
	manager certificate.Manager // set by Run
}

// NewServingCertificate checks the options. It does no I/O.
func NewServingCertificate(opts ServingCertificateOptions) (*ServingCertificate, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("nodeapi: ServingCertificateOptions.Client is required")
	case opts.NodeName == "":
		return nil, errors.New("nodeapi: ServingCertificateOptions.NodeName is required")
	case opts.CertDir == "":
		return nil, errors.New("nodeapi: ServingCertificateOptions.CertDir is required")
	case len(opts.Hostnames) == 0 && len(opts.IPs) == 0:
		return nil, errors.New("nodeapi: a serving certificate needs a host name or an IP")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &ServingCertificate{opts: opts, log: opts.Logger.WithName("servingcert")}, nil
}

// The kubelet's name of the key pair in CertDir.
const servingPairName = "kubelet-server"

// rotator is the certificate manager's method that requests a new
// certificate and waits until it is issued, its Stop, or a 15 minute
// limit.
type rotator interface {
	RotateCerts() (bool, error)
}

// GetCertificate returns the current certificate, for
// tls.Config.GetCertificate; an error while there is none (not issued yet,
// or expired).
func (c *ServingCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	m := c.manager
	c.mu.Unlock()
	if m != nil {
		if cert := m.Current(); cert != nil {
			return cert, nil
		}
	}
	return nil, errors.New("nodeapi: no serving certificate is available yet: the node's CertificateSigningRequest waits for approval")
}

// template is the kubelet's serving certificate request.
func (c *ServingCertificate) template() *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject: pkix.Name{
			CommonName:   "system:node:" + c.opts.NodeName,
			Organization: []string{"system:nodes"},
		},
		DNSNames:    c.opts.Hostnames,
		IPAddresses: c.opts.IPs,
	}
}

// Run keeps a valid certificate until ctx ends: it requests one at once
// when there is none, then each at its rotation deadline. A request that
// fails or is not issued within 15 minutes is made again after a back-off
// doubling from 2 s to 32 s. It returns nil when ctx ends, once the request
// in flight was given up.
func (c *ServingCertificate) Run(ctx context.Context) error {
	if err := os.MkdirAll(c.opts.CertDir, 0o700); err != nil {
		return fmt.Errorf("nodeapi: certificate directory: %w", err)
	}
	store, err := certificate.NewFileStoreWithLogger(c.log.V(2), servingPairName, c.opts.CertDir, c.opts.CertDir, "", "")
	if err != nil {
		return fmt.Errorf("nodeapi: certificate store: %w", err)
	}
	// The manager takes its logger from the context; a context without
	// cancellation starts no goroutine of its own (Stop ends it).
	mctx := logr.NewContext(context.WithoutCancel(ctx), c.log)
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return c.opts.Client, nil },
		Template:         c.template(),
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "kubelet-serving",
		Ctx:              &mctx,
	})
	if err != nil {
		return fmt.Errorf("nodeapi: certificate manager: %w", err)
	}
	rot, ok := m.(rotator)
	if !ok {
		return errors.New("nodeapi: client-go's certificate manager cannot be asked to rotate")
	}
	c.mu.Lock()
	c.manager = m
	c.mu.Unlock()

	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		<-ctx.Done()
		// Ends the request in flight.
		m.Stop()
	}()
	clk := c.opts.Clock
	backoff := 2 * time.Second
	for {
		wait := time.Duration(0)
		if cur := m.Current(); cur != nil && cur.Leaf != nil && c.satisfies(cur.Leaf) {
			wait = RotationDeadline(cur.Leaf.NotBefore, cur.Leaf.NotAfter, rand.Float64()).Sub(clk.Now())
			c.log.V(2).Info("Next serving certificate rotation", "deadline", clk.Now().Add(wait), "expiration", cur.Leaf.NotAfter)
		}
		if wait > 0 {
			t := clk.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		c.log.V(0).Info("Requesting a serving certificate", "signer", certificatesv1.KubeletServingSignerName)
		ok, err := rot.RotateCerts()
		if ctx.Err() != nil {
			return nil
		}
		if ok {
			backoff = 2 * time.Second
			c.log.V(0).Info("Serving certificate issued")
			continue
		}
		c.log.Info("No serving certificate issued; retrying", "after", backoff, "err", fmt.Sprint(err))
		t := clk.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		backoff = min(2*backoff, 32*time.Second)
	}
}

// satisfies reports whether cert carries the template's names, as the
// manager checks before it waits for the deadline.
func (c *ServingCertificate) satisfies(cert *x509.Certificate) bool {
	tmpl := c.template()
	if cert.Subject.CommonName != tmpl.Subject.CommonName {
		return false
	}
	for _, h := range tmpl.DNSNames {
		if !contains(cert.DNSNames, h) {
			return false
		}
	}
	for _, ip := range tmpl.IPAddresses {
		found := false
		for _, cip := range cert.IPAddresses {
			found = found || cip.Equal(ip)
		}
		if !found {
			return false
		}
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// RotationDeadline is when a certificate valid from notBefore to notAfter
// is renewed: at 70 % of its lifetime plus up to 20 % (r in [0, 1)), as
// client-go's certificate manager computes it.
func RotationDeadline(notBefore, notAfter time.Time, r float64) time.Time {
	total := notAfter.Sub(notBefore)
	return notBefore.Add(time.Duration(float64(total) * (0.7 + 0.2*r)))
}
