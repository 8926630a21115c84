// Package certificate requests a certificate from the cluster, keeps it,
// and renews it before it expires, as the kubelet's certificate manager
// (client-go's util/certificate) does, in code of its own over a
// three-method CSRClient: see nodeapi's package doc for why. The node
// API's serving certificate (nodeapi.ServingCertificate) and the agent's
// client certificate (package bootstrap) are both kept by a Manager.
package certificate

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
// client a Manager calls: it creates its requests, and reads and watches
// each one until it is issued. client-go's
// CertificatesV1().CertificateSigningRequests() satisfies it.
type CSRClient interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Options configure a Manager.
type Options struct {
	// Client creates the CertificateSigningRequests and watches them.
	// Required.
	Client CSRClient
	// Subject, Hostnames and IPs are the request's: the issued
	// certificate must have them. A subject is required.
	Subject   pkix.Name
	Hostnames []string
	IPs       []net.IP
	// SignerName and Usages are the request's. Required.
	SignerName string
	Usages     []certificatesv1.KeyUsage
	// CertDir keeps the key and certificate (<PairName>-current.pem, a
	// link to the latest <PairName>-<date>.pem), as the kubelet's.
	// Required, as PairName.
	CertDir, PairName string
	// What names the certificate in logs and errors ("serving",
	// "client").
	What string
	// OnRotate, when set, is called with each certificate issued, after
	// it is kept and current. It must not block.
	OnRotate func(*tls.Certificate)
	// Clock times the rotations, the back-off and the wait for issuance,
	// and tells whether a certificate has expired. Defaults to the real
	// clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
}

// Manager keeps a certificate obtained from the cluster, as the
// kubelet's certificate manager (client-go's util/certificate): for a
// new ECDSA P-256 key, a CertificateSigningRequest of the signer, subject,
// names and usages given. Run requests one when CertDir holds no valid
// certificate or one that lacks a name of the request, and a new one at a
// random point between 70 and 90 % of the certificate's lifetime. A
// request that is denied, fails, or is not issued within 15 minutes is
// logged and made again after a back-off; the current certificate is
// used meanwhile until it expires.
//
// Current and GetCertificate are safe for concurrent use; Run is called
// once.
type Manager struct {
	opts Options
	log  logr.Logger
	tmpl *x509.CertificateRequest

	store *pairStore // set by Load or Run

	cert atomic.Pointer[tls.Certificate] // nil until one is loaded or issued
}

// New checks the options. It does no I/O.
func New(opts Options) (*Manager, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("certificate: Options.Client is required")
	case opts.Subject.CommonName == "":
		return nil, errors.New("certificate: Options.Subject needs a common name")
	case opts.CertDir == "" || opts.PairName == "":
		return nil, errors.New("certificate: Options.CertDir and PairName are required")
	case opts.SignerName == "" || len(opts.Usages) == 0:
		return nil, errors.New("certificate: Options.SignerName and Usages are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.What == "" {
		opts.What = "client"
	}
	c := &Manager{opts: opts, log: opts.Logger}
	c.tmpl = &x509.CertificateRequest{
		Subject:     opts.Subject,
		DNSNames:    slices.Clone(opts.Hostnames),
		IPAddresses: slices.Clone(opts.IPs),
	}
	c.store = &pairStore{dir: opts.CertDir, prefix: opts.PairName, now: opts.Clock.Now}
	return c, nil
}

// Current returns the current certificate: nil while there is none, or
// once it expired.
func (c *Manager) Current() *tls.Certificate {
	cert := c.cert.Load()
	if cert == nil || c.opts.Clock.Now().After(cert.Leaf.NotAfter) {
		return nil
	}
	return cert
}

// Load loads the certificate kept in CertDir, if valid, as Run first
// does; it reports whether there is one.
func (c *Manager) Load() bool {
	if err := c.store.recover(); err != nil {
		c.log.Error(err, "Cannot recover the certificate's link", "certificate", c.opts.What)
	}
	switch cert, err := c.store.current(); {
	case errors.Is(err, os.ErrNotExist):
		c.log.V(2).Info("No certificate kept yet", "certificate", c.opts.What, "dir", c.opts.CertDir)
	case err != nil:
		c.log.Error(err, "Ignoring the kept certificate: requesting a new one", "certificate", c.opts.What)
	case !c.opts.Clock.Now().Before(cert.Leaf.NotAfter):
		c.log.Info("The kept certificate has expired: requesting a new one", "certificate", c.opts.What, "expiration", cert.Leaf.NotAfter)
	default:
		c.log.V(2).Info("Loaded the kept certificate", "certificate", c.opts.What, "expiration", cert.Leaf.NotAfter)
		c.cert.Store(cert)
		return true
	}
	return false
}

// CurrentPath is the file of the current pair: the certificates, then
// the key.
func (c *Manager) CurrentPath() string { return c.store.path("current") }

// GetCertificate returns the current certificate, for
// tls.Config.GetCertificate; an error while there is none (not issued yet,
// or expired).
func (c *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := c.cert.Load()
	if cert == nil {
		return nil, fmt.Errorf("no %s certificate is available yet: the node's CertificateSigningRequest waits for approval", c.opts.What)
	}
	if c.opts.Clock.Now().After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("the %s certificate expired at %s and no new one is issued yet", c.opts.What, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
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
func (c *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(c.opts.CertDir, 0o700); err != nil {
		return fmt.Errorf("certificate: certificate directory: %w", err)
	}
	clk := c.opts.Clock
	if c.cert.Load() == nil {
		c.Load()
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
			c.log.Error(err, "No usable certificate issued; retrying", "certificate", c.opts.What, "after", d)
			if !sleep(ctx, clk, d) {
				return nil
			}
		}
	}
}

// untilRotation is how long the current certificate is kept: until its
// rotation deadline, none when there is none or it lacks a name.
func (c *Manager) untilRotation() time.Duration {
	cur := c.cert.Load()
	if cur == nil {
		return 0
	}
	if missing := c.missingNames(cur.Leaf); missing != "" {
		c.log.Info("The certificate lacks a name of the request: requesting a new one", "certificate", c.opts.What, "missing", missing)
		return 0
	}
	deadline := RotationDeadline(cur.Leaf.NotBefore, cur.Leaf.NotAfter, rand.Float64())
	c.log.V(2).Info("Next certificate rotation", "certificate", c.opts.What, "deadline", deadline, "expiration", cur.Leaf.NotAfter)
	return deadline.Sub(c.opts.Clock.Now())
}

// rotate requests a certificate and, once issued, keeps and serves it. An
// issued certificate that lacks a name of the request, or is due for
// rotation at once, is served but is an error, so that the next request
// waits for the back-off rather than following at once.
func (c *Manager) rotate(ctx context.Context) error {
	c.log.V(0).Info("Requesting a certificate", "certificate", c.opts.What, "signer", c.opts.SignerName)
	cert, err := c.request(ctx)
	if err != nil {
		return err
	}
	c.cert.Store(cert)
	c.log.V(0).Info("Certificate issued", "certificate", c.opts.What, "expiration", cert.Leaf.NotAfter)
	if c.opts.OnRotate != nil {
		c.opts.OnRotate(cert)
	}
	if missing := c.missingNames(cert.Leaf); missing != "" {
		return fmt.Errorf("certificate: the issued %s certificate lacks the %s", c.opts.What, missing)
	}
	if !c.opts.Clock.Now().Before(RotationDeadline(cert.Leaf.NotBefore, cert.Leaf.NotAfter, 0)) {
		return fmt.Errorf("certificate: the issued %s certificate, valid from %s to %s, is due for rotation at once", c.opts.What, cert.Leaf.NotBefore, cert.Leaf.NotAfter)
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
func (c *Manager) missingNames(cert *x509.Certificate) string {
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
