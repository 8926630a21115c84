package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// connTransport is the default transport of HTTP probes: one connection
// per request, as the kubelet's transport with keep-alives off, but
// without what a connection pool costs a request that is the only one on
// its connection (http.Transport's reader and writer goroutines per
// connection, its pool bookkeeping). The request is written and the
// response read by the calling goroutine, through net/http's own
// Request.Write and ReadResponse; the connection is closed with the
// response body. Redirects are left to the http.Client in front of it.
type connTransport struct {
	tls *tls.Config
}

func newTransport() http.RoundTripper {
	return &connTransport{tls: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the kubelet does not verify probe targets either
}

// RoundTrip sends req on a new connection and returns its response, whose
// body closes the connection. The request's context bounds the whole
// exchange, body included: its deadline is the connection's, and its end
// closes the connection.
func (t *connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	ctx := req.Context()
	var port string
	switch req.URL.Scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return nil, errors.New("unsupported protocol scheme " + req.URL.Scheme)
	}
	if p := req.URL.Port(); p != "" {
		port = p
	}
	conn, err := dialer(time.Time{}).DialContext(ctx, "tcp", net.JoinHostPort(req.URL.Hostname(), port))
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	var once sync.Once
	closeConn := func() { once.Do(func() { _ = conn.Close() }) }
	stop := context.AfterFunc(ctx, closeConn)
	fail := func(err error) (*http.Response, error) {
		stop()
		closeConn()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}

	if req.URL.Scheme == "https" {
		cfg := t.tls.Clone()
		cfg.ServerName = req.URL.Hostname()
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	}
	out := *req // a RoundTripper must not modify the request
	out.Close = true
	if err := out.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	for {
		res, err := http.ReadResponse(br, req)
		if err != nil {
			return fail(err)
		}
		// Informational responses (100 Continue, 103 Early Hints) precede
		// the answer, as http.Transport skips them.
		if res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		res.Body = &connBody{ReadCloser: res.Body, close: func() { stop(); closeConn() }}
		return res, nil
	}
}

// connBody is a response body that closes its connection.
type connBody struct {
	io.ReadCloser
	close func()
}

func (b *connBody) Close() error {
	err := b.ReadCloser.Close()
	b.close()
	return err
}
