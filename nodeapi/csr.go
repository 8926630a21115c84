package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/certificate"
)

// CSRClient is the part of the API server's CertificateSigningRequest
// client a ServingCertificate calls: it creates its requests, and reads
// and watches each one until it is issued. client-go's
// CertificatesV1().CertificateSigningRequests() satisfies it.
type CSRClient = certificate.CSRClient

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
	m *certificate.Manager
}

// The kubelet's name of the key pair in CertDir.
const servingPairName = "kubelet-server"

// The kubelet's serving usages for an ECDSA key
// (DefaultKubeletServingGetUsages of client-go's certificate manager: key
// encipherment only for RSA keys).
var servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}

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
	m, err := certificate.New(certificate.Options{
		Client:     opts.Client,
		Subject:    pkix.Name{CommonName: "system:node:" + opts.NodeName, Organization: []string{"system:nodes"}},
		Hostnames:  opts.Hostnames,
		IPs:        opts.IPs,
		SignerName: certificatesv1.KubeletServingSignerName,
		Usages:     servingUsages,
		CertDir:    opts.CertDir,
		PairName:   servingPairName,
		What:       "serving",
		Clock:      opts.Clock,
		Logger:     opts.Logger.WithName("servingcert"),
	})
	if err != nil {
		return nil, fmt.Errorf("nodeapi: %w", err)
	}
	return &ServingCertificate{m: m}, nil
}

// GetCertificate returns the current certificate, for
// tls.Config.GetCertificate; an error while there is none (not issued yet,
// or expired).
func (c *ServingCertificate) GetCertificate(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, err := c.m.GetCertificate(h)
	if err != nil {
		return nil, fmt.Errorf("nodeapi: %w", err)
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
	if err := c.m.Run(ctx); err != nil {
		return fmt.Errorf("nodeapi: %w", err)
	}
	return nil
}

// RotationDeadline is when a certificate valid from notBefore to notAfter
// is renewed: at 70 % of its lifetime plus up to 20 % (r in [0, 1)), as
// the kubelet's certificate manager computes it.
func RotationDeadline(notBefore, notAfter time.Time, r float64) time.Time {
	return certificate.RotationDeadline(notBefore, notAfter, r)
}
