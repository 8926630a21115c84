package nodeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	stdlog "log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// logWriter sends the HTTP server's own messages (TLS handshake errors)
// to the logger.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(2).Info("HTTP server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}

// DefaultPort is the kubelet's authenticated API port.
const DefaultPort = 10250

// ServerOptions configure a Server.
type ServerOptions struct {
	// Address is the IP address to listen on. Defaults to all addresses,
	// as the kubelet's --address.
	Address string
	// Port defaults to 10250.
	Port int
	// Listener, when set, is used instead of Address and Port (tests,
	// socket activation). The server closes it.
	Listener net.Listener

	// CertFile and KeyFile are the PEM serving certificate and key (the
	// kubelet's --tls-cert-file, --tls-private-key-file). Without them
	// the server serves a self-signed certificate for Hostnames and IPs,
	// kept in CertDir (kubelet.crt, kubelet.key) when that is set and
	// reused from there, as the kubelet does.
	CertFile, KeyFile string
	CertDir           string
	Hostnames         []string
	IPs               []net.IP
	// GetCertificate, when set, gives the certificate of each TLS
	// handshake instead (a ServingCertificate's, which rotates); the
	// fields above are then unused.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ClientAuth asks clients for a certificate so that Auth can verify
	// it. Defaults to tls.RequestClientCert: the certificate is verified
	// by the handler's X509Authenticator, not by the TLS handshake.
	ClientAuth tls.ClientAuthType

	// Insecure serves plain HTTP, which nothing needs but a loopback
	// health port. Defaults to false.
	Insecure bool

	// ShutdownTimeout bounds how long Run waits for requests to finish
	// once its context ends; streams still open then are closed. Defaults
	// to 5 seconds.
	ShutdownTimeout time.Duration

	// Logger defaults to discarding.
	Logger logr.Logger
}

// Server serves a handler over HTTPS until its context ends. Create it
// with NewServer; Run it once.
type Server struct {
	h    http.Handler
	opts ServerOptions
	log  logr.Logger

	mu       sync.Mutex
	hijacked map[net.Conn]struct{}
	addr     net.Addr
	ready    chan struct{}
}

// NewServer returns a server for h. It does no I/O: certificates are
// read or made by Run.
func NewServer(h http.Handler, opts ServerOptions) (*Server, error) {
	if h == nil {
		return nil, errors.New("nodeapi: NewServer needs a handler")
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("nodeapi: port %d out of range", opts.Port)
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, errors.New("nodeapi: CertFile and KeyFile go together")
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.ClientAuth == tls.NoClientCert {
		opts.ClientAuth = tls.RequestClientCert
	}
	return &Server{h: h, opts: opts, log: opts.Logger.WithName("nodeapi"), hijacked: map[net.Conn]struct{}{}, ready: make(chan struct{})}, nil
}

// Addr returns the address the server listens on, once Run has started
// listening (it waits until then or until ctx ends).
func (s *Server) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-s.ready:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.addr == nil {
			return nil, errors.New("nodeapi: server did not start")
		}
		return s.addr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run listens and serves until ctx ends, then stops accepting, cancels the
// requests in flight (log follows end), closes open streams, and returns
// nil once every handler has returned. It returns an error when it cannot
// listen or load its certificate.
func (s *Server) Run(ctx context.Context) error {
	var readyOnce sync.Once
	markReady := func() { readyOnce.Do(func() { close(s.ready) }) }
	defer markReady()

	var tlsConfig *tls.Config
	if !s.opts.Insecure {
		tlsConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			ClientAuth: s.opts.ClientAuth,
			NextProtos: []string{"h2", "http/1.1"},
		}
		if s.opts.GetCertificate != nil {
			tlsConfig.GetCertificate = s.opts.GetCertificate
		} else {
			cert, err := s.certificate()
			if err != nil {
				return err
			}
			tlsConfig.Certificates = []tls.Certificate{cert}
		}
	}
	ln := s.opts.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(s.opts.Address, strconv.Itoa(s.opts.Port)))
		if err != nil {
			return fmt.Errorf("nodeapi: listen: %w", err)
		}
	}
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	markReady()

	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	var handlers sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			s.h.ServeHTTP(w, r)
		}),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ConnState: func(c net.Conn, st http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch st {
			case http.StateHijacked:
				s.hijacked[c] = struct{}{}
			case http.StateClosed:
				delete(s.hijacked, c)
			}
		},
		ErrorLog: stdlog.New(logWriter{s.log}, "", 0),
	}
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	s.log.V(0).Info("Serving the node API", "address", ln.Addr().String(), "tls", tlsConfig != nil)

	select {
	case err := <-errc:
		srv.Close()
		cancelRequests()
		handlers.Wait()
		return fmt.Errorf("nodeapi: serve: %w", err)
	case <-ctx.Done():
	}
	// Stop accepting; end the requests (log follows) and the streams.
	cancelRequests()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	s.closeHijacked()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-errc
	// Streams hijacked meanwhile.
	s.closeHijacked()
	handlers.Wait()
	return nil
}

func (s *Server) closeHijacked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.hijacked {
		c.Close()
		delete(s.hijacked, c)
	}
}

// certificate loads the serving certificate, or makes (and keeps) a
// self-signed one.
func (s *Server) certificate() (tls.Certificate, error) {
	if s.opts.CertFile != "" {
		c, err := tls.LoadX509KeyPair(s.opts.CertFile, s.opts.KeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("nodeapi: serving certificate: %w", err)
		}
		return c, nil
	}
	if s.opts.CertDir != "" {
		crt, key := filepath.Join(s.opts.CertDir, "kubelet.crt"), filepath.Join(s.opts.CertDir, "kubelet.key")
		if c, err := tls.LoadX509KeyPair(crt, key); err == nil {
			return c, nil
		}
		certPEM, keyPEM, err := SelfSignedCertificate(s.opts.Hostnames, s.opts.IPs, time.Now())
		if err != nil {
			return tls.Certificate{}, err
		}
		if err := os.MkdirAll(s.opts.CertDir, 0o755); err != nil {
			return tls.Certificate{}, fmt.Errorf("nodeapi: certificate directory: %w", err)
		}
		if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
			return tls.Certificate{}, fmt.Errorf("nodeapi: writing the key: %w", err)
		}
		if err := os.WriteFile(crt, certPEM, 0o644); err != nil {
			return tls.Certificate{}, fmt.Errorf("nodeapi: writing the certificate: %w", err)
		}
		return tls.X509KeyPair(certPEM, keyPEM)
	}
	certPEM, keyPEM, err := SelfSignedCertificate(s.opts.Hostnames, s.opts.IPs, time.Now())
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// SelfSignedCertificate returns a PEM certificate and EC P-256 key for
// serving, valid for a year from now for the host names and IPs (the
// first host name, or "localhost", is the common name), as the kubelet
// makes when it is given no serving certificate.
func SelfSignedCertificate(hostnames []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeapi: generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("nodeapi: serial number: %w", err)
	}
	cn := "localhost"
	if len(hostnames) > 0 {
		cn = hostnames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cn, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              hostnames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeapi: creating a certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeapi: encoding the key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
