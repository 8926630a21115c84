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
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// CSRClient is the part of the API server's CertificateSigningRequest
// client a ServingCertificate calls: it creates its requests, and reads
// and watches each one until it is issued. client-go's
// CertificatesV1().CertificateSigningRequests() satisfies it.
type CSRClient interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ServingCertificateOptions configure a ServingCertificate.
type ServingCertificateOptions struct {
	// Client creates the CertificateSigningRequests and watches them.
	// Required.
	Client CSRClient
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
	// Clock times the rotations, the back-off and the wait for issuance,
	// and tells whether a certificate has expired. Defaults to the real
	// clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
}

// ServingCertificate is the node API's serving certificate obtained from
// the cluster, as the kubelet's with serverTLSBootstrap (or
// --rotate-server-certificates): for a new ECDSA P-256 key, a
// CertificateSigningRequest of signer kubernetes.io/kubelet-serving for
// system:node:<name> in group system:nodes, with the node's names, for
// digital signature and server auth. Run requests one when CertDir holds
// no valid certificate or one that lacks a name of the request, and a new
// one at a random point between 70 and 90 % of the certificate's
// lifetime, as the kubelet's certificate manager does. The cluster must
// approve the requests (Kubernetes does not approve this signer by
// itself: an operator or an approving controller does) and sign them
// (kube-controller-manager's csrsigning, for this signer). A request that
// is denied, fails, or is not issued within 15 minutes is logged and made
// again after a back-off; the current certificate is served meanwhile
// until it expires.
//
// GetCertificate gives the current certificate to each TLS handshake
// (ServerOptions.GetCertificate). It is safe for concurrent use; Run is
// called once.
type ServingCertificate struct {
	opts ServingCertificateOptions
	log  logr.Logger
	tmpl *x509.CertificateRequest

	store *pairStore // set by Run

	cert atomic.Pointer[tls.Certificate] // nil until one is loaded or issued
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
	c := &ServingCertificate{opts: opts, log: opts.Logger.WithName("servingcert")}
	c.tmpl = &x509.CertificateRequest{
		Subject: pkix.Name{
			CommonName:   "system:node:" + opts.NodeName,
			Organization: []string{"system:nodes"},
		},
		DNSNames:    slices.Clone(opts.Hostnames),
		IPAddresses: slices.Clone(opts.IPs),
	}
	return c, nil
}

// The kubelet's name of the key pair in CertDir.
const servingPairName = "kubelet-server"

// The kubelet's serving usages for an ECDSA key
// (DefaultKubeletServingGetUsages of client-go's certificate manager: key
// encipherment only for RSA keys).
var servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}

// GetCertificate returns the current certificate, for
// tls.Config.GetCertificate; an error while there is none (not issued yet,
// or expired).
func (c *ServingCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := c.cert.Load()
	if cert == nil {
		return nil, errors.New("nodeapi: no serving certificate is available yet: the node's CertificateSigningRequest waits for approval")
	}
	if c.opts.Clock.Now().After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("nodeapi: the serving certificate expired at %s and no new one is issued yet", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// Run keeps a valid certificate until ctx ends: it loads the one kept in
// CertDir, requests one at once when there is none valid or it lacks a
// name of the request, then each at its rotation deadline. A request that
// fails is made again after a back-off of 2, 4, 8 and 16 s (each up to 10
// % longer), then every 32 s, as the kubelet's certificate manager does.
// It returns nil when ctx ends, once the request in flight was given up;
// an error only when CertDir cannot be made.
func (c *ServingCertificate) Run(ctx context.Context) error {
	if err := os.MkdirAll(c.opts.CertDir, 0o700); err != nil {
		return fmt.Errorf("nodeapi: certificate directory: %w", err)
	}
	clk := c.opts.Clock
	st := &pairStore{dir: c.opts.CertDir, prefix: servingPairName, now: clk.Now}
	c.store = st
	if err := st.recover(); err != nil {
		c.log.Error(err, "Cannot recover the serving certificate's link")
	}
	switch cert, err := st.current(); {
	case errors.Is(err, os.ErrNotExist):
		c.log.V(2).Info("No serving certificate kept yet", "dir", c.opts.CertDir)
	case err != nil:
		c.log.Error(err, "Ignoring the kept serving certificate: requesting a new one")
	case !clk.Now().Before(cert.Leaf.NotAfter):
		c.log.Info("The kept serving certificate has expired: requesting a new one", "expiration", cert.Leaf.NotAfter)
	default:
		c.log.V(2).Info("Loaded the kept serving certificate", "expiration", cert.Leaf.NotAfter)
		c.cert.Store(cert)
	}

	for {
		if !sleep(ctx, clk, c.untilRotation()) {
			return nil
		}
		// Until a usable certificate is issued: the deadline is not drawn
		// again meanwhile.
		var bo backoff
		for {
			err := c.rotate(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				break
			}
			d := bo.next()
			c.log.Error(err, "No usable serving certificate issued; retrying", "after", d)
			if !sleep(ctx, clk, d) {
				return nil
			}
		}
	}
}

// untilRotation is how long the current certificate is kept: until its
// rotation deadline, none when there is none or it lacks a name.
func (c *ServingCertificate) untilRotation() time.Duration {
	cur := c.cert.Load()
	if cur == nil {
		return 0
	}
	if missing := c.missingNames(cur.Leaf); missing != "" {
		c.log.Info("The serving certificate lacks a name of the request: requesting a new one", "missing", missing)
		return 0
	}
	deadline := RotationDeadline(cur.Leaf.NotBefore, cur.Leaf.NotAfter, rand.Float64())
	c.log.V(2).Info("Next serving certificate rotation", "deadline", deadline, "expiration", cur.Leaf.NotAfter)
	return deadline.Sub(c.opts.Clock.Now())
}

// rotate requests a certificate and, once issued, keeps and serves it. An
// issued certificate that lacks a name of the request, or is due for
// rotation at once, is served but is an error, so that the next request
// waits for the back-off rather than following at once.
func (c *ServingCertificate) rotate(ctx context.Context) error {
	c.log.V(0).Info("Requesting a serving certificate", "signer", certificatesv1.KubeletServingSignerName)
	cert, err := c.request(ctx)
	if err != nil {
		return err
	}
	c.cert.Store(cert)
	c.log.V(0).Info("Serving certificate issued", "expiration", cert.Leaf.NotAfter)
	if missing := c.missingNames(cert.Leaf); missing != "" {
		return fmt.Errorf("nodeapi: the issued serving certificate lacks the %s", missing)
	}
	if !c.opts.Clock.Now().Before(RotationDeadline(cert.Leaf.NotBefore, cert.Leaf.NotAfter, 0)) {
		return fmt.Errorf("nodeapi: the issued serving certificate, valid from %s to %s, is due for rotation at once", cert.Leaf.NotBefore, cert.Leaf.NotAfter)
	}
	return nil
}

// sleep waits d on clk; false when ctx ended first.
func sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) bool {
	if d > 0 {
		t := clk.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C():
		}
	}
	return ctx.Err() == nil
}

// backoff is the certificate manager's: 2 s doubling for 4 retries with
// up to 10 % jitter, then 32 s.
type backoff struct{ step int }

func (b *backoff) next() time.Duration {
	if b.step >= 4 {
		return 32 * time.Second
	}
	d := (2 * time.Second) << b.step
	b.step++
	return d + time.Duration(rand.Float64()*0.1*float64(d))
}

// missingNames describes what of the request's subject and names cert
// lacks (common name, organization, DNS names, IPs), as the certificate
// manager checks before it waits for the deadline; "" when none.
func (c *ServingCertificate) missingNames(cert *x509.Certificate) string {
	t := c.tmpl
	if cert.Subject.CommonName != t.Subject.CommonName {
		return "common name " + t.Subject.CommonName
	}
	for _, o := range t.Subject.Organization {
		if !slices.Contains(cert.Subject.Organization, o) {
			return "organization " + o
		}
	}
	for _, h := range t.DNSNames {
		if !slices.Contains(cert.DNSNames, h) {
			return "DNS name " + h
		}
	}
	for _, ip := range t.IPAddresses {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return "IP " + ip.String()
		}
	}
	return ""
}

// RotationDeadline is when a certificate valid from notBefore to notAfter
// is renewed: at 70 % of its lifetime plus up to 20 % (r in [0, 1)), as
// the kubelet's certificate manager computes it.
func RotationDeadline(notBefore, notAfter time.Time, r float64) time.Time {
	total := notAfter.Sub(notBefore)
	return notBefore.Add(time.Duration(float64(total) * (0.7 + 0.2*r)))
}
