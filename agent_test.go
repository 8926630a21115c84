package nodekit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
	"github.com/nodekit/nodekit/volume"
)

// logBuffer collects log lines for assertions (and shows them with -v).
type logBuffer struct {
	// verbosity of the lines kept; 1 when zero.
	verbosity int

	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		b.lines = append(b.lines, prefix+" "+args)
		b.mu.Unlock()
	}, funcr.Options{Verbosity: max(b.verbosity, 1)})
}

// contains reports whether a line holds every one of parts.
func (b *logBuffer) contains(parts ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (b *logBuffer) dump(t *testing.T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		t.Log(l)
	}
}

// harness runs an agent on the in-memory runtime for one test.
type harness struct {
	t     *testing.T
	rt    *runtimetest.Runtime
	agent *nodekit.Agent
	logs  *logBuffer
	stop  func() error

	mu       sync.Mutex
	statuses map[string]v1.PodStatus // by pod full name
}

func startAgent(t *testing.T, rt *runtimetest.Runtime, opts nodekit.Options) *harness {
	t.Helper()
	return startAgentWithLogs(t, rt, &logBuffer{}, opts)
}

// startAgentWithLogs starts an agent logging into logs, which the test may
// have given its sources too.
func startAgentWithLogs(t *testing.T, rt *runtimetest.Runtime, logs *logBuffer, opts nodekit.Options) *harness {
	t.Helper()
	h := &harness{t: t, rt: rt, logs: logs, statuses: map[string]v1.PodStatus{}}
	if opts.NodeName == "" {
		opts.NodeName = "node1"
	}
	if opts.Runtime == nil {
		// A test may give a wrapper of rt.
		opts.Runtime = rt
	}
	opts.RuntimeManager.PodLogsDir = t.TempDir()
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	if opts.Cgroups.Root == "" {
		// The in-memory runtime runs no processes; tests that want cgroups
		// name their own root.
		opts.Cgroups.Disabled = true
	}
	opts.Logger = h.logs.logger(t)
	opts.OnPodStatus = func(pod *v1.Pod, s v1.PodStatus) {
		h.mu.Lock()
		h.statuses[pod.Namespace+"/"+pod.Name] = s
		h.mu.Unlock()
	}
	a, err := nodekit.New(opts)
	if err != nil {
		t.Fatalf("nodekit.New: %v", err)
	}
	h.agent = a
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	h.stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Agent.Run: %v", err)
		}
		if t.Failed() {
			h.logs.dump(t)
		}
	})
	return h
}

func (h *harness) status(fullName string) (v1.PodStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.statuses[fullName]
	return s, ok
}

// checkLeaks fails the test if goroutines it started outlive it. It is
// registered before the agent's own clean-up, so it runs after it.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) })
}

// eventually polls cond every 10ms until it holds or timeout passes.
// waitTimeout bounds the real-time waits of the tests whose agent works
// on real files, sockets or cgroups (where testing/synctest cannot run):
// each wait ends as soon as its condition holds, and the bound is generous
// so that a loaded machine does not fail them.
const waitTimeout = time.Minute

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) running(fullName string) bool {
	s, ok := h.status(fullName)
	if !ok || s.Phase != v1.PodRunning {
		return false
	}
	for _, c := range s.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return len(s.ContainerStatuses) > 0
}

func (h *harness) containers(state runtimeapi.ContainerState) []*runtimeapi.Container {
	cs, err := h.rt.ListContainers(h.t.Context(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: state}})
	if err != nil {
		h.t.Fatalf("ListContainers: %v", err)
	}
	return cs
}

func (h *harness) sandboxes() []*runtimeapi.PodSandbox {
	s, err := h.rt.ListPodSandbox(h.t.Context(), nil)
	if err != nil {
		h.t.Fatalf("ListPodSandbox: %v", err)
	}
	return s
}

func writeManifest(t *testing.T, dir, name, body string) {
	t.Helper()
	// Write then rename, so the source never reads a half-written file.
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

const webManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 7
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "echo %s; sleep 3600"]
`

func fileSource(t *testing.T, dir string, log logr.Logger) nodekit.NamedSource {
	t.Helper()
	src, err := file.New(file.Options{Path: dir, NodeName: "node1", Period: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return nodekit.NamedSource{Name: sources.FileSource, Source: src}
}

// TestAgentStaticPodLifecycle follows a static pod through the whole
// pipeline: a manifest written to the directory runs, an edit replaces its
// container, its removal stops it within its grace period and removes its
// sandbox.
func TestAgentStaticPodLifecycle(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{fileSource(t, dir, logr.Discard())}})

	writeManifest(t, dir, "web.yaml", fmt.Sprintf(webManifest, "v1"))
	eventually(t, waitTimeout, "web Running", func() bool { return h.running("default/web-node1") })
	first := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(first) != 1 || first[0].Labels[runtime.LabelContainerName] != "app" {
		t.Fatalf("running containers = %v, want the one app container", first)
	}
	s, _ := h.status("default/web-node1")
	if got := s.ContainerStatuses[0].ContainerID; !strings.HasSuffix(got, first[0].Id) {
		t.Errorf("status container ID = %q, want it to name %q", got, first[0].Id)
	}
	if s.ContainerStatuses[0].State.Running.StartedAt.IsZero() || s.StartTime == nil {
		t.Errorf("status lacks start times: %+v", s)
	}

	// Edit: a new UID replaces the old pod; the old container stops.
	writeManifest(t, dir, "web.yaml", fmt.Sprintf(webManifest, "v2"))
	// The runtime forgets a stop once the container is removed: catch it
	// in between.
	var stopTimeout int64 = -1
	eventually(t, waitTimeout, "the edited pod's container to replace the first", func() bool {
		if to, ok := rt.LastStopTimeout(first[0].Id); ok {
			stopTimeout = to
		}
		running := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
		return len(running) == 1 && running[0].Id != first[0].Id && h.running("default/web-node1") && stopTimeout >= 0
	})
	if stopTimeout != 7 {
		t.Errorf("old container stopped with timeout %d, want the pod's grace period 7", stopTimeout)
	}
	eventually(t, waitTimeout, "the old pod's sandbox to be removed", func() bool { return len(h.sandboxes()) == 1 })

	// Removal: everything stops and goes.
	second := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)[0]
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	stopTimeout = -1
	eventually(t, waitTimeout, "the container to be stopped", func() bool {
		if to, ok := rt.LastStopTimeout(second.Id); ok {
			stopTimeout = to
		}
		return stopTimeout >= 0
	})
	if stopTimeout != 7 {
		t.Errorf("container stopped with timeout %d, want 7", stopTimeout)
	}
	eventually(t, waitTimeout, "container and sandbox removed", func() bool {
		cs, _ := rt.ListContainers(t.Context(), nil)
		return len(cs) == 0 && len(h.sandboxes()) == 0
	})
	if err := h.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// chanSource is a source the test feeds with snapshots.
type chanSource = sources.Chan

func testPod(name string, restart v1.RestartPolicy, init []string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{RestartPolicy: restart, TerminationGracePeriodSeconds: ptr(int64(5))},
	}
	for i, script := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
			Name: fmt.Sprintf("init%d", i), Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", script}})
	}
	for i, script := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", script}})
	}
	sources.SetDefaults(p)
	return p
}

func ptr[T any](v T) *T { return &v }

// TestAgentCrashLoopBackOff: a container that exits with restartPolicy
// Always is restarted with a growing back-off, and its status shows
// CrashLoopBackOff while it waits.
func TestAgentCrashLoopBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})

		var mu sync.Mutex
		var starts []time.Time
		var sawBackOff bool
		h.mu.Lock()
		h.statuses = map[string]v1.PodStatus{}
		h.mu.Unlock()
		src <- []*v1.Pod{testPod("crash", v1.RestartPolicyAlways, nil, "sleep 1; exit 3")}
		start := time.Now()
		lastID := ""
		for time.Since(start) < 8*time.Minute {
			time.Sleep(100 * time.Millisecond)
			for _, c := range h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
				if c.Id != lastID {
					lastID = c.Id
					mu.Lock()
					starts = append(starts, time.Now())
					mu.Unlock()
				}
			}
			if s, ok := h.status("default/crash"); ok && len(s.ContainerStatuses) == 1 {
				if w := s.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
					sawBackOff = true
				}
			}
		}
		if !sawBackOff {
			t.Error("status never showed CrashLoopBackOff")
		}
		// Each run lasts 1s; the first restart is immediate, then the
		// pauses between runs grow 10s, 20s, 40s, 80s, 160s, then stay at
		// 300s. The loop samples every 100ms and a restart waits for the
		// next sync tick, so allow some slack.
		want := []time.Duration{0, 10, 20, 40, 80, 160}
		if len(starts) < len(want)+1 {
			t.Fatalf("container started %d times in 8 minutes, want at least %d", len(starts), len(want)+1)
		}
		for i, w := range want {
			pause := starts[i+1].Sub(starts[i]) - time.Second
			if pause < w*time.Second-500*time.Millisecond || pause > w*time.Second+3*time.Second {
				t.Errorf("pause before restart %d = %s, want %ds (+3s slack)", i+1, pause, w)
			}
		}
		s, _ := h.status("default/crash")
		if got := s.ContainerStatuses[0].RestartCount; got < int32(len(want)) {
			t.Errorf("restart count = %d, want at least %d", got, len(want))
		}
		if lt := s.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 {
			t.Errorf("last termination state = %+v, want exit code 3", s.ContainerStatuses[0].LastTerminationState)
		}
	})
}

// TestAgentInitContainers: init containers run one at a time, in order,
// before the app container; the pod then runs to completion.
func TestAgentInitContainers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		src <- []*v1.Pod{testPod("job", v1.RestartPolicyOnFailure, []string{"sleep 2", "sleep 3"}, "sleep 5; exit 0")}
		time.Sleep(time.Minute)
		synctest.Wait()

		s, ok := h.status("default/job")
		if !ok || s.Phase != v1.PodSucceeded {
			t.Fatalf("phase = %q, want Succeeded (status %+v)", s.Phase, s)
		}
		type run struct {
			name            string
			started, finish time.Time
		}
		var runs []run
		for _, c := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
			term := c.State.Terminated
			if term == nil || term.ExitCode != 0 {
				t.Fatalf("container %s state %+v, want exited 0", c.Name, c.State)
			}
			runs = append(runs, run{c.Name, term.StartedAt.Time, term.FinishedAt.Time})
		}
		if got := []string{runs[0].name, runs[1].name, runs[2].name}; !slices.Equal(got, []string{"init0", "init1", "c0"}) {
			t.Fatalf("container order = %v", got)
		}
		for i := 1; i < len(runs); i++ {
			if runs[i].started.Before(runs[i-1].finish) {
				t.Errorf("%s started at %s, before %s finished at %s", runs[i].name, runs[i].started, runs[i-1].name, runs[i-1].finish)
			}
		}
	})
}

// TestAgentAdmission: beyond MaxPods, pods are rejected with phase Failed
// and reason OutOfpods, and never started; the others run.
func TestAgentAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}, Node: node.Options{MaxPods: 2}})
		pods := []*v1.Pod{
			testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600"),
			testPod("b", v1.RestartPolicyAlways, nil, "sleep 3600"),
			testPod("c", v1.RestartPolicyAlways, nil, "sleep 3600"),
		}
		for i, p := range pods {
			p.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))
		}
		src <- pods
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for _, name := range []string{"default/a", "default/b"} {
			if !h.running(name) {
				t.Errorf("%s not running", name)
			}
		}
		s, _ := h.status("default/c")
		if s.Phase != v1.PodFailed || s.Reason != "OutOfpods" {
			t.Errorf("rejected pod status = %s/%s, want Failed/OutOfpods", s.Phase, s.Reason)
		}
		if n := len(h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 2 {
			t.Errorf("%d containers running, want 2", n)
		}
	})
}

// TestAgentRestartAdoptsPods: an agent that restarts finds its pods running
// and neither restarts nor duplicates them; a pod removed while it was down
// is stopped and removed.
func TestAgentRestartAdoptsPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		pods := []*v1.Pod{
			testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600"),
			testPod("b", v1.RestartPolicyAlways, nil, "sleep 3600"),
			testPod("gone", v1.RestartPolicyAlways, nil, "sleep 3600"),
		}
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		src <- pods
		time.Sleep(5 * time.Second)
		synctest.Wait()
		before := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
		if len(before) != 3 {
			t.Fatalf("%d containers running, want 3", len(before))
		}
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		creates, starts, stops := rt.Calls("CreateContainer"), rt.Calls("StartContainer"), rt.Calls("StopContainer")

		src2 := make(chanSource, 1)
		h2 := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src2}}})
		src2 <- pods[:2]
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := rt.Calls("CreateContainer") - creates; got != 0 {
			t.Errorf("CreateContainer called %d times after the restart, want 0", got)
		}
		if got := rt.Calls("StartContainer") - starts; got != 0 {
			t.Errorf("StartContainer called %d times after the restart, want 0", got)
		}
		if got := rt.Calls("StopContainer") - stops; got != 1 {
			t.Errorf("StopContainer called %d times after the restart, want 1 (the pod gone meanwhile)", got)
		}
		after := h2.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
		var ids []string
		for _, c := range after {
			ids = append(ids, c.Labels[runtime.LabelPodName])
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"a", "b"}) {
			t.Errorf("running after restart: %v, want [a b]", ids)
		}
		if n := len(h2.sandboxes()); n != 2 {
			t.Errorf("%d sandboxes after restart, want 2 (the gone pod's removed)", n)
		}
		for _, name := range []string{"default/a", "default/b"} {
			if !h2.running(name) {
				t.Errorf("%s not Running after the restart", name)
			}
		}
	})
}

// TestAgentsSideBySide: two agents in one process, each with its own
// runtime and node name, do not interfere.
func TestAgentsSideBySide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hs []*harness
		for i := range 2 {
			rt := runtimetest.New(runtimetest.Options{})
			defer rt.Close()
			src := make(chanSource, 1)
			h := startAgent(t, rt, nodekit.Options{NodeName: fmt.Sprintf("node%d", i), Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
			src <- []*v1.Pod{testPod(fmt.Sprintf("p%d", i), v1.RestartPolicyAlways, nil, "sleep 3600")}
			hs = append(hs, h)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for i, h := range hs {
			if !h.running(fmt.Sprintf("default/p%d", i)) {
				t.Errorf("agent %d: its pod is not running", i)
			}
			if _, ok := h.status(fmt.Sprintf("default/p%d", 1-i)); ok {
				t.Errorf("agent %d reports the other agent's pod", i)
			}
			if n := len(h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
				t.Errorf("agent %d's runtime runs %d containers, want 1", i, n)
			}
		}
	})
}

// TestAgentRuntimeDown: while the runtime is down the agent reports it
// unhealthy and keeps going; when it returns, the pods run again.
func TestAgentRuntimeDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600")}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := h.agent.Healthy(); err != nil {
			t.Fatalf("Healthy() = %v before the outage", err)
		}
		rt.SetDown(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := h.agent.Healthy(); err == nil {
			t.Error("Healthy() = nil while the runtime is down")
		}
		rt.SetDown(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := h.agent.Healthy(); err != nil {
			t.Errorf("Healthy() = %v after the runtime returned", err)
		}
		if !h.running("default/a") {
			t.Error("pod not running after the runtime returned")
		}
		if n := len(h.sandboxes()); n != 1 {
			t.Errorf("%d sandboxes, want 1 (no duplicate)", n)
		}
		if !h.logs.contains("Container runtime not healthy") {
			t.Error("no log line says the runtime is not healthy")
		}
	})
}

func TestNewValidatesOptions(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	src := nodekit.NamedSource{Name: "test", Source: make(chanSource)}
	srcs := []nodekit.NamedSource{src}
	tests := []struct {
		name, wantErr string
		opts          nodekit.Options
	}{
		{"no sources", "at least one pod source", nodekit.Options{NodeName: "n", Runtime: rt}},
		{"no runtime", "Runtime is required", nodekit.Options{NodeName: "n", Sources: srcs}},
		{"duplicate source", `two sources named "test"`, nodekit.Options{NodeName: "n", Runtime: rt, Sources: []nodekit.NamedSource{src, src}}},
		{"negative max pods", "Node.MaxPods -1 is negative", nodekit.Options{NodeName: "n", Runtime: rt, Sources: srcs, Node: node.Options{MaxPods: -1}}},
		{"relative allowed host path", `allowed host path "data" is not`,
			nodekit.Options{NodeName: "n", Runtime: rt, Sources: srcs, Volumes: volume.Options{AllowedHostPaths: []volume.AllowedHostPath{{PathPrefix: "data"}}}}},
		{"credential provider config alone", "ImageCredentialProviderConfig and ImageCredentialProviderBinDir go together",
			nodekit.Options{NodeName: "n", Runtime: rt, Sources: srcs, ImageCredentialProviderConfig: "/etc/providers.yaml"}},
		{"credential provider bin dir missing", "image credential providers: plugin binary directory /nonexistent did not exist",
			nodekit.Options{NodeName: "n", Runtime: rt, Sources: srcs, ImageCredentialProviderConfig: "/etc/providers.yaml", ImageCredentialProviderBinDir: "/nonexistent"}},
		{"pleg fails", "no events here",
			nodekit.Options{NodeName: "n", Runtime: rt, Sources: srcs, PLEG: func(runtime.RuntimeService, pleg.StatusGetter, pleg.Cache, logr.Logger) (pleg.EventGenerator, error) {
				return nil, errors.New("no events here")
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nodekit.New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	a, err := nodekit.New(nodekit.Options{NodeName: "n", Runtime: rt, Sources: []nodekit.NamedSource{src}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context = %v", err)
	}
	if err := a.Run(t.Context()); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("second Run = %v, want an error", err)
	}
}
