package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/certificate"
	"github.com/nodekit/nodekit/kubeclient"
)

// PairName is the kubelet's name of the client certificate's pair in the
// certificate directory: kubelet-client-current.pem links to the latest
// kubelet-client-<date>.pem.
const PairName = "kubelet-client"

// Options configure a Client.
type Options struct {
	// NodeName names the certificate: common name system:node:<name>,
	// organization system:nodes. Required.
	NodeName string
	// Kubeconfig is the node's kubeconfig (the kubelet's --kubeconfig):
	// used as it is while its credentials are valid, else written, once a
	// client certificate is issued, to name the certificate kept in
	// CertDir. Required.
	Kubeconfig string
	// BootstrapKubeconfig holds the credentials that request the first
	// client certificate (a bootstrap token, the kubelet's
	// --bootstrap-kubeconfig), and the cluster's address and CA when
	// Kubeconfig holds none. Defaults to none: Kubeconfig must be valid.
	BootstrapKubeconfig string
	// CertDir keeps the client certificate and its key. Required with
	// BootstrapKubeconfig.
	CertDir string
	// Rotate renews the client certificate kept in CertDir before it
	// expires (the kubelet's rotateCertificates), with the node's own
	// credentials, and the Config's connections switch to the new one.
	// Defaults to false: the certificate is only requested when there is
	// none valid.
	Rotate bool
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
}

// Client is the node's credentials to the API server, obtained by TLS
// bootstrap as the kubelet's: a client certificate of signer
// kubernetes.io/kube-apiserver-client-kubelet for system:node:<name> in
// group system:nodes, kept in CertDir and renewed before it expires.
//
// # Usage
//
// Run keeps the certificate; Wait returns the node's rest.Config once
// there is one:
//
//	c, err := bootstrap.New(bootstrap.Options{NodeName: name, Kubeconfig: kc, BootstrapKubeconfig: bkc, CertDir: dir, Rotate: true})
//	g.Go(func() error { return c.Run(ctx) })
//	cfg, err := c.Wait(ctx)
//
// The Config's transport presents the current certificate at each TLS
// handshake, and its connections are closed when a new certificate is
// issued, so that the next requests use it (the kubelet's
// updateTransport).
//
// # Concurrency
//
// Wait and Config are safe for concurrent use; Run is called once.
type Client struct {
	opts Options
	log  logr.Logger

	startOnce sync.Once
	start     error // of load

	// Set by load.
	static  *rest.Config          // Kubeconfig, valid and not ours to keep
	mgr     *certificate.Manager  // nil with static
	node    *rest.Config          // over mgr's certificate
	dialer  *connrotation.Dialer  // the node's connections
	csrs    certificate.CSRClient // the bootstrap credentials' CSR client
	cluster rest.TLSClientConfig  // the cluster's CA and server name

	mu      sync.Mutex
	written bool          // the kubeconfig names the kept certificate
	ready   chan struct{} // closed once a certificate is current
}

// New checks the options. It does no I/O.
func New(opts Options) (*Client, error) {
	switch {
	case opts.NodeName == "":
		return nil, errors.New("bootstrap: Options.NodeName is required")
	case opts.Kubeconfig == "":
		return nil, errors.New("bootstrap: Options.Kubeconfig is required")
	case opts.BootstrapKubeconfig != "" && opts.CertDir == "":
		return nil, errors.New("bootstrap: Options.CertDir is required with BootstrapKubeconfig")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Client{opts: opts, log: opts.Logger.WithName("bootstrap"), ready: make(chan struct{})}, nil
}

// load decides, once, where the credentials come from, as the kubelet's
// LoadClientConfig: a valid Kubeconfig that does not name the kept pair is
// used as it is; otherwise the pair kept in CertDir, requested with the
// bootstrap credentials when there is none valid.
func (c *Client) load() error {
	c.startOnce.Do(func() { c.start = c.doLoad() })
	return c.start
}

func (c *Client) doLoad() error {
	kc, kcErr := c.readKubeconfig(c.opts.Kubeconfig)
	current := ""
	if c.opts.CertDir != "" {
		current = filepath.Join(c.opts.CertDir, PairName+"-current.pem")
	}
	if kcErr == nil && (current == "" || !sameFile(kc.CertFile, current)) {
		if err := c.valid(kc); err == nil {
			c.log.V(1).Info("Using the kubeconfig's credentials", "kubeconfig", c.opts.Kubeconfig)
			c.static = kc
			close(c.ready)
			return nil
		} else if c.opts.BootstrapKubeconfig == "" {
			return fmt.Errorf("bootstrap: %s: %w", c.opts.Kubeconfig, err)
		} else {
			c.log.Info("The kubeconfig's credentials are not usable: bootstrapping", "kubeconfig", c.opts.Kubeconfig, "reason", err.Error())
		}
	}
	// The cluster: the kubeconfig's, else the bootstrap kubeconfig's.
	cluster := kc
	if kcErr != nil {
		if c.opts.BootstrapKubeconfig == "" {
			return fmt.Errorf("bootstrap: %w", kcErr)
		}
		cluster = nil
	}
	var boot *rest.Config
	if c.opts.BootstrapKubeconfig != "" {
		var err error
		if boot, err = c.readKubeconfig(c.opts.BootstrapKubeconfig); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		if cluster == nil {
			cluster = boot
		}
		bc, err := kubeclient.NewForConfig(boot)
		if err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		c.csrs = bc.CertificatesV1().CertificateSigningRequests()
	}
	if current == "" {
		return errors.New("bootstrap: Options.CertDir is required to keep the client certificate")
	}
	c.cluster = rest.TLSClientConfig{CAData: cluster.CAData, ServerName: cluster.ServerName, Insecure: cluster.Insecure}
	if len(c.cluster.CAData) == 0 && cluster.CAFile != "" {
		ca, err := os.ReadFile(cluster.CAFile)
		if err != nil {
			return fmt.Errorf("bootstrap: the cluster's CA: %w", err)
		}
		c.cluster.CAData = ca
	}

	// The node's own client, over the current certificate.
	c.dialer = connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	node, err := c.nodeConfig(cluster)
	if err != nil {
		return err
	}
	c.node = node
	nc, err := kubeclient.NewForConfig(node)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	nodeCSRs := nc.CertificatesV1().CertificateSigningRequests()
	var mgr *certificate.Manager
	mgr, err = certificate.New(certificate.Options{
		Client: csrClient(func() certificate.CSRClient {
			// Renewals with the node's own certificate, as the kubelet's
			// (system:nodes may renew their own: selfnodeclient); the
			// bootstrap credentials while there is none.
			if mgr.Current() != nil || c.csrs == nil {
				return nodeCSRs
			}
			return c.csrs
		}),
		Subject:    pkix.Name{CommonName: "system:node:" + c.opts.NodeName, Organization: []string{"system:nodes"}},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		// The kubelet's usages for an ECDSA key
		// (DefaultKubeletClientGetUsages: key encipherment only for RSA).
		Usages:   []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		CertDir:  c.opts.CertDir,
		PairName: PairName,
		What:     "client",
		OnRotate: func(*tls.Certificate) { c.rotated() },
		Clock:    c.opts.Clock,
		Logger:   c.log,
	})
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	c.mgr = mgr
	if mgr.Load() {
		c.rotated()
	} else if c.csrs == nil {
		return fmt.Errorf("bootstrap: no valid client certificate in %s and no bootstrap kubeconfig to request one", c.opts.CertDir)
	}
	return nil
}

// rotated is called when a certificate becomes current: the kubeconfig
// is written (once), the node's connections closed so that the next ones
// present it, and Wait released.
func (c *Client) rotated() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.written {
		if err := c.writeKubeconfig(); err != nil {
			c.log.Error(err, "Cannot write the kubeconfig", "kubeconfig", c.opts.Kubeconfig)
		} else {
			c.written = true
			c.log.Info("Wrote the kubeconfig of the node's client certificate", "kubeconfig", c.opts.Kubeconfig)
		}
	}
	c.dialer.CloseAll()
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
}

// Run keeps the client certificate until ctx ends: it requests one when
// there is none valid (with the bootstrap credentials, retrying with a
// back-off while the API server is down, or the request is not approved
// in 15 minutes), then, with Rotate, renews it at 70 to 90 % of its
// lifetime. It returns nil when ctx ends; an error when the credentials
// cannot be read, or CertDir made.
func (c *Client) Run(ctx context.Context) error {
	if err := c.load(); err != nil {
		return err
	}
	if c.static != nil {
		<-ctx.Done()
		return nil
	}
	if !c.opts.Rotate {
		// Request one only when there is none; then keep it.
		select {
		case <-c.ready:
			<-ctx.Done()
			return nil
		default:
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- c.mgr.Run(cctx) }()
		select {
		case <-c.ready:
			cancel()
			if err := <-done; err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			<-ctx.Done()
			return nil
		case err := <-done:
			if err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			return nil
		}
	}
	if err := c.mgr.Run(ctx); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// Wait returns the node's rest.Config once it has credentials: at once
// with a valid kubeconfig or a kept certificate, else once Run obtained
// one; ctx's error if ctx ends first.
func (c *Client) Wait(ctx context.Context) (*rest.Config, error) {
	if err := c.load(); err != nil {
		return nil, err
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.Config(), nil
}

// Config returns the node's rest.Config (nil before load): the
// kubeconfig's, or one whose transport presents the current client
// certificate.
func (c *Client) Config() *rest.Config {
	if c.static != nil {
		return rest.CopyConfig(c.static)
	}
	if c.node == nil {
		return nil
	}
	return rest.CopyConfig(c.node)
}

// Current returns the current client certificate; nil with a kubeconfig
// used as it is, or while there is none.
func (c *Client) Current() *tls.Certificate {
	if c.mgr == nil {
		return nil
	}
	return c.mgr.Current()
}

// nodeConfig is a rest.Config for cluster's server and CA whose transport
// presents the Manager's current certificate.
func (c *Client) nodeConfig(cluster *rest.Config) (*rest.Config, error) {
	tlsCfg, err := rest.TLSConfigFor(&rest.Config{Host: cluster.Host, TLSClientConfig: c.cluster})
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if tlsCfg == nil {
		return nil, fmt.Errorf("bootstrap: %s is not an https server: a client certificate needs TLS", cluster.Host)
	}
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cur := c.mgr.Current(); cur != nil {
			return cur, nil
		}
		return &tls.Certificate{}, nil // none: the server sees an anonymous request
	}
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         c.dialer.DialContext,
	})
	return &rest.Config{
		Host:      cluster.Host,
		APIPath:   cluster.APIPath,
		Transport: t,
		QPS:       cluster.QPS, Burst: cluster.Burst, ContentConfig: cluster.ContentConfig,
		Timeout: cluster.Timeout, UserAgent: cluster.UserAgent,
	}, nil
}

// readKubeconfig reads a kubeconfig into a rest.Config.
func (c *Client) readKubeconfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// valid checks a kubeconfig's credentials as the kubelet's
// isClientConfigStillValid: a client certificate must not have expired.
func (c *Client) valid(cfg *rest.Config) error {
	data := cfg.CertData
	if len(data) == 0 && cfg.CertFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.CertFile); err != nil {
			return err
		}
	}
	if len(data) == 0 {
		if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.Username == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
			return errors.New("no credentials")
		}
		return nil
	}
	certs, err := parseCerts(data)
	if err != nil {
		return err
	}
	now := c.opts.Clock.Now()
	for _, crt := range certs {
		if now.After(crt.NotAfter) {
			return fmt.Errorf("the client certificate expired at %s", crt.NotAfter.UTC().Format(time.RFC3339))
		}
		if now.Before(crt.NotBefore) {
			return fmt.Errorf("the client certificate is valid only from %s", crt.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// writeKubeconfig writes the kubeconfig that names the kept pair, with
// the cluster the node talks to, as the kubelet's.
func (c *Client) writeKubeconfig() error {
	cluster := &clientcmdapi.Cluster{Server: c.node.Host}
	tc := c.cluster
	cluster.CertificateAuthorityData = tc.CAData
	cluster.TLSServerName = tc.ServerName
	cluster.InsecureSkipTLSVerify = tc.Insecure
	pair := c.mgr.CurrentPath()
	if abs, err := filepath.Abs(pair); err == nil {
		pair = abs
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pair, ClientKey: pair}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(c.opts.Kubeconfig), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(kc, c.opts.Kubeconfig)
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		crt, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, crt)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in the client certificate data")
	}
	return out, nil
}

func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// csrClient chooses the CSR client of each call.
type csrClient func() certificate.CSRClient

func (f csrClient) Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	return f().Create(ctx, csr, opts)
}

func (f csrClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error) {
	return f().Get(ctx, name, opts)
}

func (f csrClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f().Watch(ctx, opts)
}
