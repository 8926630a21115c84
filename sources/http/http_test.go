package http

import (
	"bytes"
	"context"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/sourcestest"
)

// Tests use real httptest servers, whose goroutines live outside any
// synctest bubble: they use real time, short periods and deadlines.

const (
	node  = "node-1"
	wait  = 5 * time.Second
	quiet = 200 * time.Millisecond
	// period is short so that tests see several polls.
	period = 10 * time.Millisecond
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

func podYAML(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

func podJSON(name, image string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":%q}]}}`, name, image)
}

func podListJSON(items ...string) string {
	return `{"apiVersion":"v1","kind":"PodList","items":[` + strings.Join(items, ",") + `]}`
}

// server serves what the test sets, and records the requests.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	body     []byte
	delay    time.Duration
	requests int
	headers  []nethttp.Header
}

func newServer(t *testing.T, body string) *server {
	s := &server{status: nethttp.StatusOK, body: []byte(body)}
	s.Server = httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		s.mu.Lock()
		s.requests++
		s.headers = append(s.headers, r.Header.Clone())
		status, body, delay := s.status, s.body, s.delay
		s.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, []byte(body)
}

func (s *server) setDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// waitRequests waits until the server got n more requests than now.
func (s *server) waitRequests(t *testing.T, n int) {
	t.Helper()
	target := s.count() + n
	deadline := time.Now().Add(wait)
	for s.count() < target {
		if time.Now().After(deadline) {
			t.Fatalf("server got %d requests, want %d", s.count(), target)
		}
		time.Sleep(time.Millisecond)
	}
}

// logLines records what a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 4})
}

func (l *logLines) find(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func (l *logLines) waitFor(t *testing.T, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for len(l.find(subs...)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in time", subs)
		}
		time.Sleep(time.Millisecond)
	}
}

type harness struct {
	t     *testing.T
	snaps chan []*v1.Pod
	logs  *logLines
}

func start(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, snaps: make(chan []*v1.Pod, 1000), logs: &logLines{}}
	opts.NodeName = node
	if opts.Period == 0 {
		opts.Period = period
	}
	opts.Logger = h.logs.logger()
	src, err := New(opts)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, h.snaps) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

func summary(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name+" "+p.Spec.Containers[0].Image)
	}
	return out
}

func (h *harness) next() []*v1.Pod {
	h.t.Helper()
	select {
	case pods := <-h.snaps:
		return pods
	case <-time.After(wait):
		h.t.Fatal("no snapshot in time")
		return nil
	}
}

func (h *harness) none() {
	h.t.Helper()
	select {
	case pods := <-h.snaps:
		h.t.Errorf("unexpected snapshot %q", summary(pods))
	case <-time.After(quiet):
	}
}

func TestNew(t *testing.T) {
	client := &nethttp.Client{}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
		check   func(t *testing.T, s *Source)
	}{
		{
			name: "defaults",
			opts: Options{URL: "http://h/p", NodeName: node},
			check: func(t *testing.T, s *Source) {
				got := []any{s.opts.Period, s.opts.Timeout, s.opts.MaxBodyBytes, s.opts.Client.Timeout}
				want := []any{20 * time.Second, 10 * time.Second, int64(10 << 20), 10 * time.Second}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Period, Timeout, MaxBodyBytes, Client.Timeout (-want +got):\n%s", diff)
				}
				if s.opts.Client.Transport == nethttp.DefaultTransport {
					t.Error("default client shares net/http's DefaultTransport")
				}
			},
		},
		{
			name: "client kept",
			opts: Options{URL: "https://h/p", NodeName: node, Client: client},
			check: func(t *testing.T, s *Source) {
				if s.opts.Client != client || s.ownClient != nil {
					t.Error("given Client not used")
				}
			},
		},
		{name: "no URL", opts: Options{NodeName: node}, wantErr: "http: URL is required"},
		{name: "not http", opts: Options{URL: "file:///etc/pods", NodeName: node}, wantErr: `http: URL "file:///etc/pods" is not an http or https URL`},
		{name: "no host", opts: Options{URL: "/pods", NodeName: node}, wantErr: `http: URL "/pods" is not an http or https URL`},
		{name: "negative timeout", opts: Options{URL: "http://h/p", NodeName: node, Timeout: -1}, wantErr: "http: negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("New() = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			tt.check(t, s)
		})
	}
}

func TestBodies(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
		// wantLog are substrings of one log line, when set.
		wantLog []string
	}{
		{name: "YAML pod", body: podYAML("web", "nginx:1"), want: []string{"web-node-1 nginx:1"}},
		{name: "JSON pod without kind", body: podJSON("web", "nginx:1"), want: []string{"web-node-1 nginx:1"}},
		{
			name: "JSON pod list",
			body: podListJSON(podJSON("a", "nginx:1"), podJSON("b", "redis:7")),
			want: []string{"a-node-1 nginx:1", "b-node-1 redis:7"},
		},
		{
			name: "YAML pod list",
			body: "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec:\n    containers: [{name: c, image: 'nginx:1'}]\n",
			want: []string{"a-node-1 nginx:1"},
		},
		{
			name:    "invalid pods of a list are dropped alone",
			body:    podListJSON(podJSON("a", "nginx:1"), `{"metadata":{"name":"bad"},"spec":{}}`, podJSON("b", ""), podJSON("c", "x:1")),
			want:    []string{"a-node-1 nginx:1", "c-node-1 x:1"},
			wantLog: []string{`"msg"="dropping invalid pod from the list"`, `"pod"="bad"`, "spec.containers: Required value"},
		},
		{
			name: "a hostUsers: false pod with hostPID is dropped alone",
			body: podListJSON(podJSON("a", "nginx:1"),
				`{"metadata":{"name":"userns"},"spec":{"hostUsers":false,"hostPID":true,"containers":[{"name":"c","image":"x:1"}]}}`),
			want:    []string{"a-node-1 nginx:1"},
			wantLog: []string{`"msg"="dropping invalid pod from the list"`, `"pod"="userns"`, "spec.HostPID: Forbidden: when `hostUsers` is false"},
		},
		{
			name: "empty list",
			body: podListJSON(),
			want: []string{},
		},
		{
			name:    "two documents: the first one's pod, the second logged",
			body:    "---\n" + podYAML("a", "x:1") + "---\n" + podYAML("b", "y:1"),
			want:    []string{"a-node-1 x:1"},
			wantLog: []string{`"msg"="manifest document ignored"`, "document 2 of 2 ignored", "as the kubelet reads it"},
		},
		{
			name:    "a pod list, then a pod: the list's pods",
			body:    podListJSON(podJSON("a", "nginx:1"), podJSON("b", "redis:7")) + "\n---\n" + podYAML("c", "x:1") + "---\n# only a comment\n",
			want:    []string{"a-node-1 nginx:1", "b-node-1 redis:7"},
			wantLog: []string{`"msg"="manifest document ignored"`, "document 2 of 2 ignored"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.body)
			h := start(t, Options{URL: srv.URL + "/pods"})
			pods := h.next()
			if diff := cmp.Diff(tt.want, summary(pods)); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
			for _, p := range pods {
				if p.UID == "" || p.Annotations["kubernetes.io/config.hash"] != string(p.UID) || p.Spec.NodeName != node {
					t.Errorf("pod %s not defaulted as a static pod: %+v", p.Name, p.ObjectMeta)
				}
			}
			if tt.wantLog != nil && len(h.logs.find(tt.wantLog...)) != 1 {
				t.Errorf("no single log line with %q in %q", tt.wantLog, h.logs.find())
			}
		})
	}
}

func TestHeadersSent(t *testing.T) {
	srv := newServer(t, podYAML("web", "nginx:1"))
	hdr := nethttp.Header{"Authorization": {"Bearer abc"}, "X-Node": {"n1", "n2"}}
	h := start(t, Options{URL: srv.URL, Header: hdr})
	h.next()
	hdr.Set("Authorization", "changed after New")
	srv.waitRequests(t, 2)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for i, got := range srv.headers {
		if diff := cmp.Diff(hdr.Values("X-Node"), got.Values("X-Node")); diff != "" {
			t.Errorf("request %d X-Node (-want +got):\n%s", i, diff)
		}
		if a := got.Get("Authorization"); a != "Bearer abc" {
			t.Errorf("request %d Authorization = %q, want Bearer abc", i, a)
		}
	}
}

func TestFailuresKeepThePreviousSnapshot(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		break_  func(s *server)
		wantLog string
	}{
		{
			name:    "status 500",
			break_:  func(s *server) { s.set(nethttp.StatusInternalServerError, "oops") },
			wantLog: "unexpected status 500 Internal Server Error",
		},
		{
			name:    "20 MB body",
			break_:  func(s *server) { s.set(nethttp.StatusOK, podYAML("web", "nginx:1")+strings.Repeat("#", 20<<20)) },
			wantLog: "body larger than 10485760 bytes",
		},
		{
			name:    "slow server",
			opts:    Options{Timeout: 50 * time.Millisecond},
			break_:  func(s *server) { s.setDelay(time.Minute) },
			wantLog: "context deadline exceeded",
		},
		{
			name:    "unparsable body",
			break_:  func(s *server) { s.set(nethttp.StatusOK, "{not yaml") },
			wantLog: "cannot decode body",
		},
		{
			name:    "two documents, the first one bad",
			break_:  func(s *server) { s.set(nethttp.StatusOK, "{not yaml\n---\n"+podYAML("b", "x:1")) },
			wantLog: "cannot decode body",
		},
		{
			name:    "invalid single pod",
			break_:  func(s *server) { s.set(nethttp.StatusOK, podYAML("web", "")) },
			wantLog: "spec.containers[0].image: Required value",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, podYAML("web", "nginx:1"))
			opts := tt.opts
			opts.URL = srv.URL + "/pods"
			h := start(t, opts)
			if got := summary(h.next()); !cmp.Equal(got, []string{"web-node-1 nginx:1"}) {
				t.Fatalf("first snapshot = %q", got)
			}
			tt.break_(srv)
			h.logs.waitFor(t, `"msg"="cannot read pods from URL"`, `"url"="`+opts.URL+`"`, tt.wantLog)
			h.none()

			srv.setDelay(0)
			srv.set(nethttp.StatusOK, podYAML("web", "nginx:2"))
			if got := summary(h.next()); !cmp.Equal(got, []string{"web-node-1 nginx:2"}) {
				t.Errorf("snapshot after recovery = %q", got)
			}
			h.logs.waitFor(t, "reading pods from URL succeeded again")
		})
	}
}

func TestFirstPollFailsNothingSent(t *testing.T) {
	srv := newServer(t, "")
	srv.set(nethttp.StatusNotFound, "")
	h := start(t, Options{URL: srv.URL})
	srv.waitRequests(t, 5)
	h.none()
	if n := len(h.logs.find(`"msg"="cannot read pods from URL"`, `"error"=`, "404 Not Found")); n != 2 {
		t.Errorf("%d failures logged as plain errors, want 2", n)
	}
	if n := len(h.logs.find(`"msg"="cannot read pods from URL; further failures for this reason are logged at V(4)"`)); n != 1 {
		t.Errorf("%d notes about quieter logging, want 1", n)
	}
	if n := len(h.logs.find(`"reason"=`, "404 Not Found")); n < 2 {
		t.Errorf("%d later failures logged at V(4), want at least 2", n)
	}
}

// TestChangedFailureReasonLoggedAgain: after the failures of one reason
// went quiet, a failure for another reason is logged as an error again,
// and so is the first reason when it comes back.
func TestChangedFailureReasonLoggedAgain(t *testing.T) {
	srv := newServer(t, "")
	srv.set(nethttp.StatusNotFound, "")
	h := start(t, Options{URL: srv.URL})
	srv.waitRequests(t, 5)
	errorsFor := func(reason string) int {
		return len(h.logs.find(`"msg"="cannot read pods from URL`, `"error"=`, reason))
	}
	if n := errorsFor("404 Not Found"); n != quietAfter {
		t.Fatalf("%d errors for the 404s, want %d", n, quietAfter)
	}
	srv.set(nethttp.StatusInternalServerError, "")
	h.logs.waitFor(t, `"error"=`, "500 Internal Server Error")
	srv.waitRequests(t, 10)
	if n := errorsFor("500 Internal Server Error"); n != quietAfter {
		t.Errorf("%d errors for the 500s, want %d", n, quietAfter)
	}
	srv.set(nethttp.StatusNotFound, "")
	srv.waitRequests(t, 12)
	h.logs.waitFor(t, `"error"=`, "404 Not Found")
	if n := errorsFor("404 Not Found"); n <= quietAfter {
		t.Errorf("%d errors for the 404s after the 500s, want more than %d", n, quietAfter)
	}
}

func TestUnchangedBodyNotResentNorDecoded(t *testing.T) {
	srv := newServer(t, podYAML("web", "nginx:1"))
	h := start(t, Options{URL: srv.URL})
	first := h.next()
	srv.waitRequests(t, 10)
	h.none()
	if n := len(h.logs.find(`"msg"="decoding body"`)); n != 1 {
		t.Errorf("body decoded %d times over 10+ polls, want once", n)
	}

	srv.set(nethttp.StatusOK, podYAML("web", "nginx:2"))
	changed := h.next()
	if diff := cmp.Diff([]string{"web-node-1 nginx:2"}, summary(changed)); diff != "" {
		t.Errorf("snapshot after a change (-want +got):\n%s", diff)
	}
	if changed[0].UID == first[0].UID {
		t.Errorf("changed body kept UID %q", first[0].UID)
	}
}

func TestBadBodyDecodedOnce(t *testing.T) {
	srv := newServer(t, "{bad")
	h := start(t, Options{URL: srv.URL})
	srv.waitRequests(t, 10)
	h.none()
	if n := len(h.logs.find(`"msg"="decoding body"`)); n != 1 {
		t.Errorf("bad body decoded %d times over 10+ polls, want once", n)
	}
}

func TestEmptyBody(t *testing.T) {
	srv := newServer(t, "")
	h := start(t, Options{URL: srv.URL})
	if got := h.next(); len(got) != 0 {
		t.Errorf("snapshot for an empty body = %q, want empty", summary(got))
	}
	h.logs.waitFor(t, `"msg"="cannot read pods from URL"`, "empty body")

	srv.set(nethttp.StatusOK, podYAML("web", "nginx:1"))
	h.next()
	srv.set(nethttp.StatusOK, "")
	if got := h.next(); len(got) != 0 {
		t.Errorf("snapshot for an empty body = %q, want empty", summary(got))
	}
	// The same body as before the empty one is sent again.
	srv.set(nethttp.StatusOK, podYAML("web", "nginx:1"))
	if got := summary(h.next()); !cmp.Equal(got, []string{"web-node-1 nginx:1"}) {
		t.Errorf("snapshot after the empty body = %q", got)
	}
}

func TestSameContentFromTwoURLsDiffersInUID(t *testing.T) {
	body := podYAML("web", "nginx:1")
	srv := newServer(t, body)
	a := start(t, Options{URL: srv.URL + "/a"}).next()[0]
	b := start(t, Options{URL: srv.URL + "/b"}).next()[0]
	again := start(t, Options{URL: srv.URL + "/a"}).next()[0]
	if a.UID == b.UID {
		t.Error("two URLs gave the same UID")
	}
	if a.UID != again.UID {
		t.Errorf("one URL gave two UIDs: %q, %q", a.UID, again.UID)
	}
}

func TestBodyAtTheLimit(t *testing.T) {
	body := []byte(podYAML("web", "nginx:1"))
	limit := int64(len(body))
	srv := newServer(t, string(body))
	h := start(t, Options{URL: srv.URL, MaxBodyBytes: limit})
	if got := summary(h.next()); !cmp.Equal(got, []string{"web-node-1 nginx:1"}) {
		t.Errorf("snapshot at the limit = %q", got)
	}
	srv.set(nethttp.StatusOK, string(append(bytes.Clone(body), '\n')))
	h.logs.waitFor(t, fmt.Sprintf("body larger than %d bytes", limit))
	h.none()
}

func TestConformance(t *testing.T) {
	srv := newServer(t, podYAML("web", "nginx:1"))
	sourcestest.SourceSuite(t, func(t *testing.T) sources.Source {
		src, err := New(Options{URL: srv.URL, NodeName: node, Period: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return src
	})
}

// TestSetNodeName: the node name comes from the agent (SetNodeName); one
// given in Options must be the agent's; a Source without one does not run.
func TestSetNodeName(t *testing.T) {
	s, err := New(Options{URL: "http://h/p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(t.Context(), make(chan []*v1.Pod, 1)); err == nil || !strings.Contains(err.Error(), "no node name") {
		t.Fatalf("Run without a node name = %v, want an error", err)
	}
	if err := s.SetNodeName("n1"); err != nil || s.opts.NodeName != "n1" {
		t.Fatalf("SetNodeName = %v, NodeName %q", err, s.opts.NodeName)
	}
	other, _ := New(Options{URL: "http://h/p", NodeName: "n2"})
	if err := other.SetNodeName("n1"); err == nil || !strings.Contains(err.Error(), `"n2" is not the agent's node name "n1"`) {
		t.Fatalf("SetNodeName over another node's name = %v", err)
	}
}

// TestManyDocuments: a body of many documents gives the first one's pod;
// the first ten ignored documents are logged one by one and the others as
// one count, once per new body.
func TestManyDocuments(t *testing.T) {
	body := podYAML("a", "x:1") + strings.Repeat("---\n"+podYAML("b", "y:1"), 1000)
	srv := newServer(t, body)
	h := start(t, Options{URL: srv.URL})
	if got := summary(h.next()); !cmp.Equal(got, []string{"a-node-1 x:1"}) {
		t.Fatalf("snapshot = %q, want the first document's pod", got)
	}
	srv.waitRequests(t, 3)
	if n := len(h.logs.find(`"msg"="manifest document ignored"`)); n != 10 {
		t.Errorf("%d lines for single ignored documents, want 10", n)
	}
	for _, d := range []string{"document 2 of 1001 ignored", "document 11 of 1001 ignored"} {
		if n := len(h.logs.find(`"msg"="manifest document ignored"`, d)); n != 1 {
			t.Errorf("%d lines with %q, want 1", n, d)
		}
	}
	if n := len(h.logs.find(`"msg"="manifest documents ignored"`, `"count"=990`, "documents 12 to 1001 of 1001 ignored")); n != 1 {
		t.Errorf("%d lines counting the other ignored documents, want 1: %q", n, h.logs.find("ignored"))
	}
}

// TestSetLogger: a Source made without a Logger logs through the one
// SetLogger gives (the agent's); one made with a Logger keeps its own.
func TestSetLogger(t *testing.T) {
	body := podYAML("a", "x:1") + "---\n" + podYAML("b", "y:1")
	for _, tt := range []struct {
		name          string
		own           bool
		wantOwn, want int
	}{
		{name: "no Logger of its own", own: false, wantOwn: 0, want: 1},
		{name: "a Logger of its own", own: true, wantOwn: 1, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, body)
			own, agent := &logLines{}, &logLines{}
			opts := Options{URL: srv.URL, NodeName: node, Period: period}
			if tt.own {
				opts.Logger = own.logger()
			}
			src, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			var setter sources.LoggerSetter = src
			setter.SetLogger(agent.logger().WithName("sources"))
			ctx, cancel := context.WithCancel(t.Context())
			snaps := make(chan []*v1.Pod, 100)
			done := make(chan error, 1)
			go func() { done <- src.Run(ctx, snaps) }()
			<-snaps
			srv.waitRequests(t, 2)
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run() = %v", err)
			}
			if n := len(own.find(`"msg"="manifest document ignored"`)); n != tt.wantOwn {
				t.Errorf("%d lines in the Source's own logger, want %d", n, tt.wantOwn)
			}
			if n := len(agent.find(`sources/http`, `"msg"="manifest document ignored"`, `"url"="`+srv.URL+`"`)); n != tt.want {
				t.Errorf("%d lines in the agent's logger, want %d: %q", n, tt.want, agent.find())
			}
		})
	}
}
