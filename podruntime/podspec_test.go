package podruntime_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

type event struct{ reason, message string }

type eventList struct {
	mu sync.Mutex
	ev []event
}

func (l *eventList) Event(_ apiruntime.Object, _, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, event{reason, message})
}

func (l *eventList) has(reason, message string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.ev {
		if e.reason == reason && e.message == message {
			return true
		}
	}
	return false
}

type specFixture struct {
	rt     *runtimetest.Runtime
	m      *podruntime.Manager
	events *eventList
	root   string
}

func newSpecFixture(t *testing.T) *specFixture {
	t.Helper()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	t.Cleanup(rt.Close)
	f := &specFixture{rt: rt, events: &eventList{}, root: t.TempDir()}
	m, err := podruntime.New(rt, rt, podruntime.Options{
		PodLogsDir: t.TempDir(), RootDir: f.root, Recorder: f.events,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func specPod(c v1.Container) *v1.Pod {
	c.Name, c.Image, c.ImagePullPolicy = "main", "busybox:1.36", v1.PullIfNotPresent
	grace := int64(10)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{c}},
	}
}

// sync runs one SyncPod from a fresh status.
func (f *specFixture) sync(t *testing.T, pod *v1.Pod) podruntime.SyncResult {
	t.Helper()
	st, err := f.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return f.m.SyncPod(t.Context(), pod, st)
}

func (f *specFixture) container(t *testing.T) runtimetest.Container {
	t.Helper()
	cs := f.rt.Containers()
	if len(cs) != 1 {
		t.Fatalf("runtime holds %d containers, want 1", len(cs))
	}
	return cs[0]
}

func (f *specFixture) status(t *testing.T, pod *v1.Pod) *runtime.ContainerStatus {
	t.Helper()
	st, err := f.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	cs := st.FindContainerStatusByName("main")
	if cs == nil {
		t.Fatal("no status of container main")
	}
	return cs
}

// mountAt returns the host path of the container's mount at path.
func (f *specFixture) mountAt(t *testing.T, id, path string) string {
	t.Helper()
	resp, err := f.rt.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.GetStatus().GetMounts() {
		if m.GetContainerPath() == path {
			return m.GetHostPath()
		}
	}
	t.Fatalf("container %s has no mount at %s", id, path)
	return ""
}

func TestTerminationMessageFile(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
		policy              v1.TerminationMessagePolicy
		code                int32
		log                 string
	}{
		{name: "the file's content", content: "bye now", want: "bye now", code: 1},
		{name: "the last 4 KiB of a huge file", content: strings.Repeat("x", 10000) + strings.Repeat("y", 4096), want: strings.Repeat("y", 4096)},
		{name: "FallbackToLogsOnError with an empty file and a failure: the log tail", policy: v1.TerminationMessageFallbackToLogsOnError, code: 2,
			log:  "2026-01-01T00:00:00Z stdout F first\n2026-01-01T00:00:01Z stderr P par\n2026-01-01T00:00:01Z stderr F tial\n",
			want: "first\npartial\n"},
		{name: "FallbackToLogsOnError on success: nothing", policy: v1.TerminationMessageFallbackToLogsOnError, code: 0,
			log: "2026-01-01T00:00:00Z stdout F done\n", want: ""},
		{name: "the file wins over the log", policy: v1.TerminationMessageFallbackToLogsOnError, code: 3, content: "from file",
			log: "2026-01-01T00:00:00Z stdout F from log\n", want: "from file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSpecFixture(t)
			pod := specPod(v1.Container{TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: tc.policy})
			if err := f.sync(t, pod).Err(); err != nil {
				t.Fatal(err)
			}
			c := f.container(t)
			host := f.mountAt(t, c.ID, "/dev/termination-log")
			if !strings.HasPrefix(host, f.root+"/pods/uid-1/containers/main/") {
				t.Errorf("termination-log host file %s is not under the pod's containers directory", host)
			}
			if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0o666 {
				t.Errorf("termination-log file: %v, %v; want mode 0666", fi, err)
			}
			if err := os.WriteFile(host, []byte(tc.content), 0o666); err != nil {
				t.Fatal(err)
			}
			if tc.log != "" {
				resp, _ := f.rt.ContainerStatus(t.Context(), c.ID, false)
				if err := os.MkdirAll(dirOf(resp.GetStatus().GetLogPath()), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(resp.GetStatus().GetLogPath(), []byte(tc.log), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.rt.ExitContainer(c.ID, tc.code, ""); err != nil {
				t.Fatal(err)
			}
			if got := f.status(t, pod).Message; got != tc.want {
				t.Errorf("message = %q, want %q", trim(got), trim(tc.want))
			}
			if tc.content == "" {
				return
			}
			// A file is read once: a change no longer shows.
			_ = os.WriteFile(host, []byte("changed"), 0o666)
			if got := f.status(t, pod).Message; got != tc.want {
				t.Errorf("second read = %q, want %q", trim(got), trim(tc.want))
			}
		})
	}
}

func dirOf(p string) string { return p[:strings.LastIndex(p, "/")] }

func trim(s string) string {
	if len(s) > 40 {
		return s[:20] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

func TestLogTailLimits(t *testing.T) {
	f := newSpecFixture(t)
	pod := specPod(v1.Container{TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError})
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	c := f.container(t)
	resp, _ := f.rt.ContainerStatus(t.Context(), c.ID, false)
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "2026-01-01T00:00:00Z stdout F line %03d\n", i)
	}
	_ = os.MkdirAll(dirOf(resp.GetStatus().GetLogPath()), 0o755)
	if err := os.WriteFile(resp.GetStatus().GetLogPath(), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = f.rt.ExitContainer(c.ID, 1, "")
	got := f.status(t, pod).Message
	// 80 lines of "line NNN\n" are 720 bytes: under 2 KiB, all kept.
	if !strings.HasPrefix(got, "line 120\n") || !strings.HasSuffix(got, "line 199\n") || strings.Count(got, "\n") != 80 {
		t.Errorf("log tail = %q, want lines 120 to 199", trim(got))
	}
}

func TestPostStartExecFailureKillsContainer(t *testing.T) {
	f := newSpecFixture(t)
	f.rt.SetExecHandler(func(_ string, cmd []string) ([]byte, []byte, int32) {
		return []byte("out"), []byte("boom"), 3
	})
	pod := specPod(v1.Container{Lifecycle: &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/setup"}}}}})
	res := f.sync(t, pod)
	err := res.Err()
	if !errors.Is(err, podruntime.ErrPostStartHook) || podruntime.Reason(err) != "PostStartHookError" {
		t.Fatalf("sync error = %v, want a PostStartHookError", err)
	}
	var msg string
	for _, r := range res.Results {
		if r.Action == podruntime.ActionStartContainer {
			msg = r.Message
		}
	}
	want := `Exec lifecycle hook ([/bin/setup]) for Container "main" in Pod "web_ns(uid-1)" failed - error: command '/bin/setup' exited with 3: boom, message: "outboom"`
	if msg != want {
		t.Errorf("message = %q\nwant      %q", msg, want)
	}
	if got := f.status(t, pod).State; got != runtime.ContainerStateExited {
		t.Errorf("container state = %s, want exited: a failed postStart kills it", got)
	}
	if !f.events.has(podruntime.EventFailedPostStartHook, "PostStartHook failed") || !f.events.has(podruntime.EventKilling, "FailedPostStartHook") {
		t.Errorf("events = %v, want FailedPostStartHook and Killing", f.events.ev)
	}
	if r, m, ok := f.m.WaitingReason(pod.UID, "main"); !ok || r != "PostStartHookError" || m != want {
		t.Errorf("waiting reason = %q %q %t", r, m, ok)
	}
}

func TestHTTPHooks(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("X-Hook")+" "+r.Header.Get("User-Agent"))
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError) // the status code is not checked
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	f := newSpecFixture(t)
	get := func(path string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: u.Hostname(), Port: intstr.FromString("web"), Path: path,
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: "yes"}}}}
	}
	pod := specPod(v1.Container{
		Ports:     []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}},
		Lifecycle: &v1.Lifecycle{PostStart: get("/start"), PreStop: get("/stop")},
	})
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/start yes kube-lifecycle/1.37", "/stop yes kube-lifecycle/1.37"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("requests = %q, want %q", seen, want)
	}

	// A server that is not there fails the postStart hook.
	srv2 := httptest.NewServer(http.NotFoundHandler())
	u2, _ := url.Parse(srv2.URL)
	srv2.Close()
	f2 := newSpecFixture(t)
	pod2 := specPod(v1.Container{Lifecycle: &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{
		Host: u2.Hostname(), Port: intstr.FromString(u2.Port()), Path: "/x"}}}})
	if err := f2.sync(t, pod2).Err(); !errors.Is(err, podruntime.ErrPostStartHook) || !strings.Contains(err.Error(), `HTTP lifecycle hook (/x) for Container "main" in Pod "web_ns(uid-1)" failed - error: `) {
		t.Errorf("sync error = %v, want an HTTP PostStartHookError", err)
	}
}

// The preStop hook runs before the container is stopped, and its time
// comes out of the grace period, leaving at least the 2 s minimum; a hook
// that outlives the grace period is cut off.
func TestPreStopGraceAccounting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sleep   int64
		grace   int64
		want    int64
		elapsed time.Duration
	}{
		{name: "3s of 10s", sleep: 3, grace: 10, want: 7, elapsed: 3 * time.Second},
		{name: "9s of 10s leaves the minimum", sleep: 9, grace: 10, want: 2, elapsed: 9 * time.Second},
		{name: "a hook longer than the grace period is cut off", sleep: 100, grace: 5, want: 2, elapsed: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newSpecFixture(t)
				pod := specPod(v1.Container{Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: tc.sleep}}}})
				pod.Spec.TerminationGracePeriodSeconds = &tc.grace
				if err := f.sync(t, pod).Err(); err != nil {
					t.Fatal(err)
				}
				id := f.container(t).ID
				start := time.Now()
				if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != tc.elapsed {
					t.Errorf("KillPod took %s, want %s", got, tc.elapsed)
				}
				if got, _ := f.rt.LastStopTimeout(id); got != tc.want {
					t.Errorf("StopContainer timeout = %d, want %d", got, tc.want)
				}
				if f.events.has(podruntime.EventFailedPreStopHook, "PreStopHook failed") {
					t.Error("FailedPreStopHook recorded for a hook that ran out of time")
				}
			})
		})
	}
}

func TestPreStopFailure(t *testing.T) {
	f := newSpecFixture(t)
	var order []string
	var mu sync.Mutex
	f.rt.SetExecHandler(func(_ string, cmd []string) ([]byte, []byte, int32) {
		mu.Lock()
		order = append(order, "hook")
		mu.Unlock()
		return nil, nil, 1
	})
	pod := specPod(v1.Container{Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}})
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	id := f.container(t).ID
	if err := f.m.KillPod(context.WithoutCancel(t.Context()), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(order) != 1 {
		t.Errorf("hook ran %d times, want once", len(order))
	}
	if !f.events.has(podruntime.EventFailedPreStopHook, "PreStopHook failed") {
		t.Errorf("events = %v, want FailedPreStopHook", f.events.ev)
	}
	if got, _ := f.rt.LastStopTimeout(id); got != 10 {
		t.Errorf("StopContainer timeout = %d, want the full 10 after a quick hook", got)
	}
}
