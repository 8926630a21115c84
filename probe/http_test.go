package probe_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/probe"
)

// outcome is what a probe returned, for comparisons.
type outcome struct {
	Result probe.Result
	Output string
	Err    bool
}

func run(t *testing.T, p probe.Prober, req probe.Request) outcome {
	t.Helper()
	r, out, err := p.Probe(t.Context(), req)
	if err != nil {
		t.Logf("probe error: %v", err)
	}
	return outcome{r, out, err != nil}
}

// serverPort splits a test server's URL.
func hostPort(t *testing.T, rawURL string) (string, int) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), port
}

func httpRequest(host string, port int, get func(*v1.HTTPGetAction)) probe.Request {
	g := &v1.HTTPGetAction{Port: intstr.FromInt32(int32(port)), Path: "/"}
	if get != nil {
		get(g)
	}
	return probe.Request{
		Type:      probe.Readiness,
		Pod:       &v1.Pod{},
		PodStatus: &v1.PodStatus{PodIP: host},
		Container: &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}},
		Probe:     &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: g}, TimeoutSeconds: 1},
	}
}

// testServer answers by path:
//
//	/code/N          status N, body "body N"
//	/redirect/N      N same-host redirects, then /code/200
//	/elsewhere       a redirect to the same server through another host name
//	/big             20 KiB of body
//	/slow            never (it waits until the request or the test ends)
//	/echo            the request's host, path, query and headers, as text
func testServer(t *testing.T) (*httptest.Server, *requests) {
	reqs := &requests{}
	mux := http.NewServeMux()
	mux.HandleFunc("/code/{n}", func(w http.ResponseWriter, r *http.Request) {
		reqs.add(r)
		n, _ := strconv.Atoi(r.PathValue("n"))
		w.WriteHeader(n)
		fmt.Fprintf(w, "body %d", n)
	})
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		reqs.add(r)
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n <= 0 {
			http.Redirect(w, r, "/code/200", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	var srv *httptest.Server
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		reqs.add(r)
		_, port := hostPort(t, srv.URL)
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/code/200", port), http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		reqs.add(r)
		w.Write([]byte(strings.Repeat("x", 20<<10)))
	})
	stop := make(chan struct{})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		reqs.add(r)
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // before srv.Close, which waits for handlers
	return srv, reqs
}

type requests struct {
	mu   sync.Mutex
	list []*http.Request
}

func (r *requests) add(req *http.Request) {
	r.mu.Lock()
	r.list = append(r.list, req)
	r.mu.Unlock()
}

func (r *requests) all() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.list...)
}

func TestHTTPResults(t *testing.T) {
	srv, _ := testServer(t)
	host, port := hostPort(t, srv.URL)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	bodyCap := strings.Repeat("x", 10<<10)
	tests := []struct {
		name string
		get  func(*v1.HTTPGetAction)
		want outcome
	}{
		{"200 succeeds with the body", path("/code/200"), outcome{probe.Success, "body 200", false}},
		{"204 succeeds", path("/code/204"), outcome{probe.Success, "", false}},
		{"399 succeeds with a warning", path("/code/399"), outcome{probe.Warning, "Probe terminated redirects, Response body: body 399", false}},
		{"300 without location succeeds with a warning", path("/code/300"), outcome{probe.Warning, "Probe terminated redirects, Response body: body 300", false}},
		{"400 fails", path("/code/400"), outcome{probe.Failure, "HTTP probe failed with statuscode: 400", false}},
		{"404 fails", path("/code/404"), outcome{probe.Failure, "HTTP probe failed with statuscode: 404", false}},
		{"500 fails", path("/code/500"), outcome{probe.Failure, "HTTP probe failed with statuscode: 500", false}},
		{"same-host redirects are followed", path("/redirect/3"), outcome{probe.Success, "body 200", false}},
		{"nine redirects are followed", path("/redirect/8"), outcome{probe.Success, "body 200", false}},
		{"a redirect to another host is not followed", path("/elsewhere"), outcome{probe.Warning,
			fmt.Sprintf("Probe terminated redirects, Response body: <a href=\"http://localhost:%d/code/200\">Found</a>.\n\n", port), false}},
		{"the body is read up to 10 KiB", path("/big"), outcome{probe.Success, bodyCap, false}},
		{"named port", func(g *v1.HTTPGetAction) { g.Port = intstr.FromString("http"); g.Path = "/code/200" }, outcome{probe.Success, "body 200", false}},
		{"port number as a string", func(g *v1.HTTPGetAction) { g.Port = intstr.FromString(strconv.Itoa(port)); g.Path = "/code/200" }, outcome{probe.Success, "body 200", false}},
		{"scheme in capitals", func(g *v1.HTTPGetAction) { g.Scheme = v1.URISchemeHTTP; g.Path = "/code/200" }, outcome{probe.Success, "body 200", false}},
		{"unknown port name", func(g *v1.HTTPGetAction) { g.Port = intstr.FromString("nope") }, outcome{probe.Unknown, "", true}},
		{"port zero", func(g *v1.HTTPGetAction) { g.Port = intstr.FromInt32(0) }, outcome{probe.Unknown, "", true}},
		{"port out of range", func(g *v1.HTTPGetAction) { g.Port = intstr.FromInt32(70000) }, outcome{probe.Unknown, "", true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, p, httpRequest(host, port, tc.get))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("probe (-want +got):\n%s", diff)
			}
		})
	}
}

func path(p string) func(*v1.HTTPGetAction) {
	return func(g *v1.HTTPGetAction) { g.Path = p }
}

func TestHTTPTooManyRedirects(t *testing.T) {
	srv, reqs := testServer(t)
	host, port := hostPort(t, srv.URL)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	got := run(t, p, httpRequest(host, port, path("/redirect/9")))
	if got.Result != probe.Failure || !strings.Contains(got.Output, "stopped after 10 redirects") || got.Err {
		t.Errorf("probe = %+v, want a failure after 10 redirects", got)
	}
	if n := len(reqs.all()); n != 10 {
		t.Errorf("server got %d requests, want 10", n)
	}
}

func TestHTTPRequest(t *testing.T) {
	srv, reqs := testServer(t)
	host, port := hostPort(t, srv.URL)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	type seen struct {
		Host, Path, Query, UserAgent, Accept, Foo string
		HasAccept                                 bool
		Connection                                string
	}
	tests := []struct {
		name string
		p    probe.Prober
		get  func(*v1.HTTPGetAction)
		want seen
	}{
		{"defaults", p, path("/code/200"),
			seen{Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/code/200", UserAgent: "kube-probe/1.37", Accept: "*/*", HasAccept: true, Connection: "close"}},
		{"query", p, path("/code/200?a=1&b=2"),
			seen{Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/code/200", Query: "a=1&b=2", UserAgent: "kube-probe/1.37", Accept: "*/*", HasAccept: true, Connection: "close"}},
		{"headers, Host override", p, func(g *v1.HTTPGetAction) {
			g.Path = "/code/200"
			g.HTTPHeaders = []v1.HTTPHeader{{Name: "x-foo", Value: "bar"}, {Name: "Host", Value: "example.com"}, {Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: "text/plain"}}
		}, seen{Host: "example.com", Path: "/code/200", UserAgent: "mine", Accept: "text/plain", HasAccept: true, Foo: "bar", Connection: "close"}},
		{"empty Accept removes it", p, func(g *v1.HTTPGetAction) {
			g.Path = "/code/200"
			g.HTTPHeaders = []v1.HTTPHeader{{Name: "Accept", Value: ""}}
		}, seen{Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/code/200", UserAgent: "kube-probe/1.37", Connection: "close"}},
		{"user agent option", probe.NewDefaultProber(probe.ProberOptions{UserAgent: "agent/1"}), path("/code/200"),
			seen{Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/code/200", UserAgent: "agent/1", Accept: "*/*", HasAccept: true, Connection: "close"}},
		{"explicit host instead of the pod IP", p, func(g *v1.HTTPGetAction) { g.Path = "/code/200"; g.Host = host },
			seen{Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/code/200", UserAgent: "kube-probe/1.37", Accept: "*/*", HasAccept: true, Connection: "close"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(reqs.all())
			req := httpRequest(host, port, tc.get)
			if tc.get != nil && req.Probe.HTTPGet.Host != "" {
				req.PodStatus = &v1.PodStatus{} // the pod has no IP: the probe's host is used
			}
			if got := run(t, tc.p, req); got.Result != probe.Success {
				t.Fatalf("probe = %+v", got)
			}
			all := reqs.all()
			if len(all) != before+1 {
				t.Fatalf("server got %d requests, want 1", len(all)-before)
			}
			r := all[before]
			_, hasAccept := r.Header["Accept"]
			got := seen{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, UserAgent: r.UserAgent(), Accept: r.Header.Get("Accept"),
				HasAccept: hasAccept, Foo: r.Header.Get("X-Foo"), Connection: r.Header.Get("Connection")}
			if r.Close {
				got.Connection = "close"
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	srv, _ := testServer(t)
	host, port := hostPort(t, srv.URL)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	start := time.Now()
	got := run(t, p, httpRequest(host, port, path("/slow")))
	// The handler never answers: only the timeout ends the probe. The
	// bound leaves a loaded machine room.
	if d := time.Since(start); d < 900*time.Millisecond || d > 10*time.Second {
		t.Errorf("probe took %v, want its 1s timeout", d)
	}
	if got.Result != probe.Failure || got.Err || !strings.Contains(got.Output, "deadline exceeded") {
		t.Errorf("probe = %+v, want a timeout failure", got)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := probe.NewDefaultProber(probe.ProberOptions{})
	got := run(t, p, httpRequest("127.0.0.1", port, nil))
	if got.Result != probe.Failure || got.Err || !strings.Contains(got.Output, "refused") {
		t.Errorf("probe = %+v, want a connection refused failure", got)
	}
}

func TestHTTPNoPodIP(t *testing.T) {
	p := probe.NewDefaultProber(probe.ProberOptions{})
	got := run(t, p, httpRequest("", 80, nil))
	if diff := cmp.Diff(outcome{probe.Unknown, "", true}, got); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
}

func TestHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			w.WriteHeader(http.StatusBadRequest)
		}
		w.Write([]byte("secure"))
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	got := run(t, p, httpRequest(host, port, func(g *v1.HTTPGetAction) { g.Scheme = v1.URISchemeHTTPS }))
	if diff := cmp.Diff(outcome{probe.Success, "secure", false}, got); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
}

func TestHTTPCancelled(t *testing.T) {
	srv, _ := testServer(t)
	host, port := hostPort(t, srv.URL)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	checkCancelled(t, p, httpRequest(host, port, path("/slow")))
}

// checkCancelled runs the probe with a 30 s timeout, cancels it after
// 100 ms, and checks that it returns well before the timeout (the bound
// leaves a loaded machine room) with an error, not a failure.
func checkCancelled(t *testing.T, p probe.Prober, req probe.Request) {
	t.Helper()
	req.Probe.TimeoutSeconds = 30
	ctx, cancel := contextWithCancel(t)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	r, _, err := p.Probe(ctx, req)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a cancelled probe took %v", d)
	}
	if err == nil || r == probe.Failure {
		t.Errorf("cancelled probe = %v, %v; want an error, not a failure", r, err)
	}
}

// TestHTTPInformational: a 103 Early Hints before the answer is skipped,
// as http.Transport skips it.
func TestHTTPInformational(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	got := run(t, probe.NewDefaultProber(probe.ProberOptions{}), httpRequest(host, port, nil))
	if diff := cmp.Diff(outcome{probe.Failure, "HTTP probe failed with statuscode: 503", false}, got); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
}

// TestHTTPSCancelledInHandshake: a server that accepts the connection but
// never answers the TLS handshake holds the probe only until its context
// ends.
func TestHTTPSCancelledInHandshake(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent until the listener closes
		}
	}()
	p := probe.NewDefaultProber(probe.ProberOptions{})
	checkCancelled(t, p, httpRequest("127.0.0.1", l.Addr().(*net.TCPAddr).Port, func(g *v1.HTTPGetAction) { g.Scheme = v1.URISchemeHTTPS }))
}
