package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// maxRedirects is how many same-host redirects an HTTP probe follows.
const maxRedirects = 10

// errTooManyRedirects is the net/http client's message, which the kubelet
// reports.
var errTooManyRedirects = errors.New("stopped after 10 redirects")

// checkRedirect follows redirects to the same host, up to maxRedirects; a
// redirect to another host is not followed: the 3xx response is the
// probe's answer (a success, with a warning).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errTooManyRedirects
	}
	return nil
}

// http sends a GET to the probe's URL: a status code from 200 to 299 is a
// success, one from 300 to 399 (a redirect that was not followed) a
// Warning, any other status code, a connection error or a timeout a
// failure. A body beyond maxOutput is cut there, as the kubelet does,
// without a warning.
func (p *DefaultProber) http(ctx context.Context, req *Request) (Result, string, error) {
	tctx, cancel := context.WithTimeout(ctx, req.Timeout())
	defer cancel()
	hreq, err := p.newHTTPRequest(tctx, req)
	if err != nil {
		return Unknown, "", err
	}
	res, err := p.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return Unknown, "", ctx.Err()
		}
		return Failure, err.Error(), nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		if ctx.Err() != nil {
			return Unknown, "", ctx.Err()
		}
		return Failure, fmt.Sprintf("reading the response: %v", err), nil
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return Warning, "Probe terminated redirects, Response body: " + body, nil
		}
		return Success, body, nil
	}
	// The kubelet keeps the body out of the failure message.
	return Failure, "HTTP probe failed with statuscode: " + strconv.Itoa(res.StatusCode), nil
}

// newHTTPRequest builds the request of an HTTP probe as the kubelet does:
// scheme (http when empty), host (the pod IP when empty), port (number or
// container port name), path (with its query), the probe's headers, a
// Host header overriding the request's host, a default User-Agent and
// Accept: */* (an Accept header set empty removes it).
func (p *DefaultProber) newHTTPRequest(ctx context.Context, req *Request) (*http.Request, error) {
	g := req.Probe.HTTPGet
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := g.Host
	if host == "" {
		h, err := podHost(req)
		if err != nil {
			return nil, err
		}
		host = h
	}
	port, err := resolvePort(g.Port, req.Container)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))

	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("probe: HTTP probe of container %q: %w", containerName(req), err)
	}
	hreq.Header = headers(g.HTTPHeaders, p.opts.UserAgent)
	if h := hreq.Header.Get("Host"); h != "" {
		hreq.Host = h
	}
	return hreq, nil
}

func headers(hs []v1.HTTPHeader, userAgent string) http.Header {
	h := make(http.Header, len(hs)+2)
	for _, x := range hs {
		h.Add(x.Name, x.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", userAgent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	return h
}
