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
	tls  *tls.Config
	bufs sync.Pool // of *connBufs
}

// connBufs are the buffers of one exchange, reused by the next ones: a
// probe allocates neither (Request.Write would allocate its writer).
type connBufs struct {
	r *bufio.Reader
	w *bufio.Writer
}

func (t *connTransport) getBufs(conn net.Conn) *connBufs {
	b, _ := t.bufs.Get().(*connBufs)
	if b == nil {
		return &connBufs{r: bufio.NewReader(conn), w: bufio.NewWriterSize(conn, 1024)}
	}
	b.r.Reset(conn)
	b.w.Reset(conn)
	return b
}

func (t *connTransport) putBufs(b *connBufs) {
	b.r.Reset(nil)
	b.w.Reset(nil)
	t.bufs.Put(b)
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
	raw, err := dialer(time.Time{}).DialContext(ctx, "tcp", net.JoinHostPort(req.URL.Hostname(), port))
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(d)
	}
	var (
		bufs *connBufs
		conn = raw
		// Closing twice (the context's end, then release) is harmless.
		closeConn = func() { _ = raw.Close() }
		stop      = context.AfterFunc(ctx, closeConn)
	)
	// release ends the exchange: the connection is closed, the buffers go
	// back to the pool.
	release := func() {
		stop()
		closeConn()
		if bufs != nil {
			t.putBufs(bufs)
		}
	}
	fail := func(err error) (*http.Response, error) {
		release()
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
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	}
	bufs = t.getBufs(conn)
	out := *req // a RoundTripper must not modify the request
	out.Close = true
	if err := out.Write(bufs.w); err != nil {
		return fail(err)
	}
	if err := bufs.w.Flush(); err != nil {
		return fail(err)
	}
	for {
		res, err := http.ReadResponse(bufs.r, req)
		if err != nil {
			return fail(err)
		}
		// Informational responses (100 Continue, 103 Early Hints) precede
		// the answer, as http.Transport skips them.
		if res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		res.Body = &connBody{ReadCloser: res.Body, release: release}
		return res, nil
	}
}

// connBody is a response body that closes its connection and releases
// its buffers, once.
type connBody struct {
	io.ReadCloser
	release func()
}

func (b *connBody) Close() error {
	err := b.ReadCloser.Close()
	if b.release != nil {
		b.release()
		b.release = nil
	}
	return err
}
