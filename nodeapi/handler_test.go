package nodeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	restclient "k8s.io/client-go/rest"
	clientremotecommand "k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/nodeapi"
)

func serve(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestContainerLogs(t *testing.T) {
	f := newFixture(t)
	h, err := nodeapi.New(f.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		target   string
		wantCode int
		wantBody string
	}{
		{"both streams", "/containerLogs/default/web/app", 200, "hello\noops\n"},
		{"stdout", "/containerLogs/default/web/app?stream=Stdout", 200, "hello\n"},
		{"stderr", "/containerLogs/default/web/app?stream=Stderr", 200, "oops\n"},
		{"timestamps", "/containerLogs/default/web/app?timestamps=true", 200,
			"2016-10-06T00:17:09.669794202Z hello\n2016-10-06T00:17:10.669794202Z oops\n"},
		{"tailLines", "/containerLogs/default/web/app?tailLines=1", 200, "oops\n"},
		{"legacy tail", "/containerLogs/default/web/app?tail=1", 200, "oops\n"},
		{"legacy tail all", "/containerLogs/default/web/app?tail=all", 200, "hello\noops\n"},
		{"limitBytes", "/containerLogs/default/web/app?limitBytes=3", 200, "hel"},
		{"sinceTime", "/containerLogs/default/web/app?sinceTime=2016-10-06T00:17:10Z", 200, "oops\n"},
		{"sinceSeconds", "/containerLogs/default/web/app?sinceSeconds=60", 200, ""},
		{"no such pod", "/containerLogs/default/nope/app", 404, `pod "nope" does not exist`},
		{"no such container", "/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`},
		{"bad number", "/containerLogs/default/web/app?tailLines=x", 400, `{"message": "Unable to decode query."}`},
		{"bad time", "/containerLogs/default/web/app?sinceTime=yesterday", 400, `{"message": "Unable to decode query."}`},
		{"negative tail", "/containerLogs/default/web/app?tailLines=-1", 422, `{"message": "Invalid request."}`},
		{"zero limit", "/containerLogs/default/web/app?limitBytes=0", 422, `{"message": "Invalid request."}`},
		{"both since", "/containerLogs/default/web/app?sinceSeconds=1&sinceTime=2016-10-06T00:17:10Z", 422, `{"message": "Invalid request."}`},
		{"bad stream", "/containerLogs/default/web/app?stream=Both", 422, `{"message": "Invalid request."}`},
		{"tail with one stream", "/containerLogs/default/web/app?stream=Stdout&tailLines=1", 422, `{"message": "Invalid request."}`},
		{"no previous", "/containerLogs/default/web/app?previous=true", 400, `previous terminated container "app" in pod "web" not found`},
		{"dot-dot path", "/containerLogs/default/../default/web/app", 404, ""},
		{"encoded dot-dot", "/containerLogs/default/web/%2e%2e", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, h, "GET", tc.target)
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d (%s)", rec.Code, tc.wantCode, rec.Body)
			}
			if tc.wantBody != "" || tc.wantCode == 200 {
				if diff := cmp.Diff(tc.wantBody, rec.Body.String()); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestPodsAndRunningPods(t *testing.T) {
	f := newFixture(t)
	h, err := nodeapi.New(f.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/pods", "/runningpods/"} {
		rec := serve(t, h, "GET", path)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: code %d, type %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		var l v1.PodList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Kind != "PodList" || l.APIVersion != "v1" || len(l.Items) != 1 {
			t.Fatalf("%s: %+v", path, l)
		}
		p := l.Items[0]
		if p.Name != "web" || p.Namespace != "default" || p.UID != "uid-1" || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Name != "app" || p.Spec.Containers[0].Image != "busybox" {
			t.Errorf("%s: pod %+v", path, p)
		}
	}
}

func TestHealthz(t *testing.T) {
	failing := errors.New("the sync loop is stuck")
	var syncloop error
	h, err := nodeapi.New(nodeapi.Options{NodeName: "n", Health: []nodeapi.HealthCheck{
		{Name: "syncloop", Check: func(*http.Request) error { return syncloop }},
		{Name: "pleg", Check: func(*http.Request) error { return nil }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path     string
		failing  bool
		wantCode int
		wantBody string
	}{
		{"/healthz", false, 200, "ok"},
		{"/healthz/syncloop", false, 200, "ok"},
		{"/healthz/pleg", false, 200, "ok"},
		{"/healthz?verbose", false, 200, "[+]ping ok\n[+]log ok\n[+]syncloop ok\n[+]pleg ok\nhealthz check passed\n"},
		{"/healthz", true, 500, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\n[+]pleg ok\nhealthz check failed\n"},
		{"/healthz/syncloop", true, 500, "internal server error: the sync loop is stuck\n"},
		{"/healthz/pleg", true, 200, "ok"},
		{"/healthz/nope", false, 404, "404 page not found\n"},
	} {
		syncloop = nil
		if tc.failing {
			syncloop = failing
		}
		rec := serve(t, h, "GET", tc.path)
		if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
			t.Errorf("%s (failing %v): %d %q, want %d %q", tc.path, tc.failing, rec.Code, rec.Body, tc.wantCode, tc.wantBody)
		}
	}
}

func TestStatsAndMetrics(t *testing.T) {
	f := newFixture(t)
	opts := f.options(nil)
	var gotOnly []bool
	opts.Stats = summaryFunc(func(_ context.Context, only bool) (*statsapi.Summary, error) {
		gotOnly = append(gotOnly, only)
		if only {
			return nil, errors.New("no cgroups")
		}
		return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-1"}}, nil
	})
	h, err := nodeapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(t, h, "GET", "/stats/summary")
	var s statsapi.Summary
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || rec.Code != 200 || s.Node.NodeName != "node-1" {
		t.Errorf("summary: %d %v %+v", rec.Code, err, s)
	}
	rec = serve(t, h, "GET", "/stats/summary?only_cpu_and_memory=true")
	if rec.Code != 500 || rec.Body.String() != "Internal Error: no cgroups" {
		t.Errorf("failing summary: %d %q", rec.Code, rec.Body)
	}
	if diff := cmp.Diff([]bool{false, true}, gotOnly); diff != "" {
		t.Errorf("only_cpu_and_memory (-want +got):\n%s", diff)
	}
	for _, path := range []string{"/metrics", "/metrics/resource", "/metrics/probes"} {
		rec := serve(t, h, "GET", path)
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(rec.Body)
		if err != nil || mfs["nodekit_test_total"] == nil {
			t.Errorf("%s: %v %v", path, err, mfs)
		}
	}
}

// echoRuntime is a streaming runtime whose exec echoes stdin to stdout,
// writes the command to stderr and exits with the code the command's
// last word gives.
type echoRuntime struct{ nodeapi.ExecOnlyRuntime }

func (echoRuntime) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	if in != nil {
		io.Copy(out, in)
	}
	fmt.Fprintf(errw, "%s: %s", id, strings.Join(cmd, " "))
	var code int
	fmt.Sscan(cmd[len(cmd)-1], &code)
	if code != 0 {
		return utilexec.CodeExitError{Err: errors.New("exit"), Code: code}
	}
	return nil
}

// TestExec drives an exec session through the handler, the upgrade-aware
// proxy and the CRI streaming server with client-go's SPDY executor:
// stdin, stdout, stderr, exit code. (kubectl's WebSocket protocol ends at
// the API server, which speaks SPDY to the node, as to the kubelet.)
func TestExec(t *testing.T) {
	f := newFixture(t)
	ss, err := nodeapi.NewStreamingServer(echoRuntime{}, nodeapi.StreamingServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ss.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	h, err := nodeapi.New(f.options(ss))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The streaming server starts listening in Run.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := ss.Exec(t.Context(), &runtimeapi.ExecRequest{ContainerId: "x", Cmd: []string{"true"}, Stdout: true}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
		}
	}

	for _, code := range []int{0, 3} {
		t.Run(fmt.Sprintf("exit %d", code), func(t *testing.T) {
			{
				u, _ := url.Parse(srv.URL + fmt.Sprintf("/exec/default/web/app?command=sh&command=-c&command=%d&input=1&output=1&error=1", code))
				cfg := &restclient.Config{Host: srv.URL}
				exec, err := clientremotecommand.NewSPDYExecutor(cfg, "POST", u)
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr bytes.Buffer
				err = exec.StreamWithContext(t.Context(), clientremotecommand.StreamOptions{
					Stdin: strings.NewReader("some input"), Stdout: &stdout, Stderr: &stderr,
				})
				var exitErr utilexec.ExitError
				switch {
				case code == 0 && err != nil:
					t.Fatalf("exit 0: %v", err)
				case code != 0 && (!errors.As(err, &exitErr) || exitErr.ExitStatus() != code):
					t.Fatalf("exit %d: got %v", code, err)
				}
				if stdout.String() != "some input" || stderr.String() != fmt.Sprintf("%s: sh -c %d", f.ctrID, code) {
					t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
				}
			}
		})
	}

	// A container that does not run, and a missing stream choice.
	if rec := serve(t, h, "POST", "/exec/default/web/nope?command=ls&output=1"); rec.Code != 404 {
		t.Errorf("missing container: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(t, h, "POST", "/exec/default/web/app?command=ls"); rec.Code != 400 {
		t.Errorf("no streams: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(t, h, "POST", "/exec/default/web/uid-2/app?command=ls&output=1"); rec.Code != 404 {
		t.Errorf("wrong UID: %d %s", rec.Code, rec.Body)
	}
}

func TestRun(t *testing.T) {
	f := newFixture(t)
	f.rt.SetExecHandler(func(id string, cmd []string) ([]byte, []byte, int32) {
		return []byte(strings.Join(cmd, ",")), []byte("E"), 0
	})
	h, err := nodeapi.New(f.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(t, h, "POST", "/run/default/web/app?cmd=echo+a+b")
	if rec.Code != 200 || rec.Body.String() != "echo,a,bE" {
		t.Errorf("run: %d %q", rec.Code, rec.Body)
	}
	if rec := serve(t, h, "POST", "/run/default/nope/app?cmd=ls"); rec.Code != 404 {
		t.Errorf("missing pod: %d", rec.Code)
	}
}

// TestConcurrentExec runs 100 exec sessions at once through the handler
// and the streaming server, then stops both: every session gets its
// output and exit code, and no goroutine is left.
func TestConcurrentExec(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFixture(t)
	ss, err := nodeapi.NewStreamingServer(echoRuntime{}, nodeapi.StreamingServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ss.Run(ctx) }()
	h, err := nodeapi.New(f.options(ss))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	for {
		if _, err := ss.Exec(t.Context(), &runtimeapi.ExecRequest{ContainerId: "x", Cmd: []string{"true"}, Stdout: true}); err == nil {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal("the streaming server did not start")
		}
	}
	const sessions = 100
	errs := make(chan error, sessions)
	for i := range sessions {
		go func() {
			u, _ := url.Parse(srv.URL + fmt.Sprintf("/exec/default/web/app?command=x&command=%d&input=1&output=1&error=1", i%5))
			exec, err := clientremotecommand.NewSPDYExecutor(&restclient.Config{Host: srv.URL}, "POST", u)
			if err != nil {
				errs <- err
				return
			}
			var stdout, stderr bytes.Buffer
			err = exec.StreamWithContext(t.Context(), clientremotecommand.StreamOptions{
				Stdin: strings.NewReader(fmt.Sprint("session ", i)), Stdout: &stdout, Stderr: &stderr,
			})
			var exitErr utilexec.ExitError
			switch {
			case i%5 == 0 && err != nil:
				errs <- fmt.Errorf("session %d: %w", i, err)
			case i%5 != 0 && (!errors.As(err, &exitErr) || exitErr.ExitStatus() != i%5):
				errs <- fmt.Errorf("session %d: exit %v, want %d", i, err, i%5)
			case stdout.String() != fmt.Sprint("session ", i):
				errs <- fmt.Errorf("session %d: stdout %q", i, stdout.String())
			default:
				errs <- nil
			}
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	srv.Close()
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestConfigzAndSpec: /configz and /spec serve the JSON their functions
// return, 404 without them.
func TestConfigzAndSpec(t *testing.T) {
	h, err := nodeapi.New(nodeapi.Options{NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/configz", "/spec/"} {
		if rec := serve(t, h, "GET", p); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s without a function: %d", p, rec.Code)
		}
	}
	fail := false
	h, err = nodeapi.New(nodeapi.Options{NodeName: "n",
		Configz: func() ([]byte, error) {
			if fail {
				return nil, errors.New("broken")
			}
			return []byte(`{"kubeletconfig":{"maxPods":20}}`), nil
		},
		Spec: func() ([]byte, error) { return []byte(`{"num_cores":2}`), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"/configz": `{"kubeletconfig":{"maxPods":20}}`, "/spec/": `{"num_cores":2}`, "/spec": `{"num_cores":2}`} {
		rec := serve(t, h, "GET", p)
		if rec.Code != http.StatusOK || rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %q %q", p, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	fail = true
	if rec := serve(t, h, "GET", "/configz"); rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "broken") {
		t.Errorf("failing configz: %d %q", rec.Code, rec.Body)
	}
}
