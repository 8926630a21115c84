package process_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/sources"
)

// webEnv makes the test binary an HTTP server on the port it names
// (see serveIfAsked): a container that serves /healthz on the host.
const webEnv = "NODEKIT_PROCESS_TEST_HTTP_PORT"

// serveIfAsked serves HTTP and never returns when the process was started
// as the test's web server.
func serveIfAsked() {
	port := os.Getenv(webEnv)
	if port == "" {
		return
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	fmt.Println("serving on", port)
	err := http.ListenAndServe("127.0.0.1:"+port, nil)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// chanSource is a source the test feeds with snapshots.
type chanSource = sources.Chan

// agentRun is an agent on the process runtime.
type agentRun struct {
	cancel context.CancelFunc
	done   chan error
	src    chanSource

	mu       sync.Mutex
	statuses map[string]v1.PodStatus
}

// startAgent starts an agent on a process runtime over dir (its state, root
// and logs); stop it with stop.
func startAgent(t *testing.T, dir string) *agentRun {
	t.Helper()
	return startAgentWith(t, dir, process.Options{})
}

// startAgentWith is startAgent with the runtime's options (StateDir and
// Logger are set).
func startAgentWith(t *testing.T, dir string, popts process.Options) *agentRun {
	t.Helper()
	popts.StateDir, popts.Logger = filepath.Join(dir, "process"), testr.New(t)
	rt, err := process.New(popts)
	if err != nil {
		t.Fatal(err)
	}
	a := &agentRun{done: make(chan error, 1), src: make(chanSource, 1), statuses: map[string]v1.PodStatus{}}
	opts := nodekit.Options{
		NodeName: "process-test",
		Sources:  []nodekit.NamedSource{{Name: "test", Source: a.src}},
		Runtime:  rt,
		RootDir:  filepath.Join(dir, "root"),
		Logger:   testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
			a.mu.Lock()
			a.statuses[pod.Name] = s
			a.mu.Unlock()
		},
	}
	opts.RuntimeManager.PodLogsDir = filepath.Join(dir, "logs")
	opts.RuntimeManager.BackOff.Initial = time.Second
	opts.RuntimeManager.BackOff.Max = 2 * time.Second
	opts.Cgroups.Disabled = true // the e2e tests cover pod cgroups
	agent, err := nodekit.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() {
		a.done <- agent.Run(ctx)
		rt.Close()
	}()
	t.Cleanup(a.stop)
	return a
}

func (a *agentRun) stop() {
	if a.cancel != nil {
		a.cancel()
		<-a.done
		a.cancel = nil
	}
}

// removeAllAtEnd removes every pod of the agent, and waits for the
// runtime to have no container left, when the test ends (before the agent
// stops: a stopped agent leaves its containers running, to adopt them
// when it starts again).
func (a *agentRun) removeAllAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		a.src <- nil
		wait(t, "every pod removed and no container left", func() bool {
			entries, err := os.ReadDir(filepath.Join(dir, "process", "containers"))
			return (err == nil && len(entries) == 0) || errors.Is(err, os.ErrNotExist)
		})
	})
}

func (a *agentRun) status(pod string) v1.PodStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statuses[pod]
}

func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after two minutes: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func shPod(name string, restart v1.RestartPolicy, init []string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{RestartPolicy: restart, TerminationGracePeriodSeconds: ptrTo(int64(30))},
	}
	for i, script := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
			Name: fmt.Sprintf("init%d", i), Image: "busybox", Command: []string{"sh", "-c", script}})
	}
	for i, script := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "busybox", Command: []string{"sh", "-c", script}})
	}
	return p
}

func ptrTo[T any](v T) *T { return &v }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestAgentPipeline runs the agent's pipeline on real processes: restart
// policies, CrashLoopBackOff, init containers, exec and HTTP readiness
// probes, graceful termination, and an agent restart that adopts the
// running containers with no restart.
func TestAgentPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for a minute")
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ready := filepath.Join(dir, "ready")

	never := shPod("never", v1.RestartPolicyNever, nil, "exit 3")
	onFailure := shPod("onfailure", v1.RestartPolicyOnFailure, []string{"echo init0", "echo init1"}, "exit 0")
	crash := shPod("crash", v1.RestartPolicyAlways, nil, "exit 1")
	probed := shPod("probed", v1.RestartPolicyAlways, nil, "sleep 1; touch "+ready+"; exec sleep 3600")
	probed.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
		Exec: &v1.ExecAction{Command: []string{"test", "-f", ready}}}}
	web := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "web", Image: "busybox", Command: []string{exe},
			Env: []v1.EnvVar{{Name: webEnv, Value: strconv.Itoa(port)}},
			ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
				HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(port)}}},
		}}},
	}
	termed := filepath.Join(dir, "termed")
	graceful := shPod("graceful", v1.RestartPolicyAlways, nil, `trap "touch `+termed+`; exit 0" TERM; while true; do sleep 0.2; done`)
	pods := []*v1.Pod{never, onFailure, crash, probed, web, graceful}
	for _, p := range pods {
		sources.SetDefaults(p)
	}

	a := startAgent(t, dir)
	a.src <- pods
	terminated := func(pod string, code int32) func() bool {
		return func() bool {
			s := a.status(pod)
			cs := append(s.InitContainerStatuses, s.ContainerStatuses...)
			return len(cs) > 0 && cs[len(cs)-1].State.Terminated != nil && cs[len(cs)-1].State.Terminated.ExitCode == code
		}
	}
	ready1 := func(pod string) func() bool {
		return func() bool {
			s := a.status(pod)
			return s.Phase == v1.PodRunning && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].Ready
		}
	}
	wait(t, "never: Failed with exit code 3", func() bool { return a.status("never").Phase == v1.PodFailed && terminated("never", 3)() })
	wait(t, "onfailure: init containers then Succeeded", func() bool { return a.status("onfailure").Phase == v1.PodSucceeded })
	for _, ic := range a.status("onfailure").InitContainerStatuses {
		if ic.State.Terminated == nil || ic.State.Terminated.ExitCode != 0 {
			t.Errorf("onfailure: init container %s: %+v", ic.Name, ic.State)
		}
	}
	wait(t, "crash: CrashLoopBackOff after restarts", func() bool {
		s := a.status("crash")
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].RestartCount >= 2 &&
			s.ContainerStatuses[0].State.Waiting != nil && s.ContainerStatuses[0].State.Waiting.Reason == "CrashLoopBackOff"
	})
	wait(t, "probed: ready once the exec probe finds its file", ready1("probed"))
	wait(t, "web: ready through its HTTP probe", ready1("web"))
	wait(t, "graceful: running", func() bool {
		s := a.status("graceful")
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Running != nil
	})
	ids := map[string]string{}
	for _, name := range []string{"probed", "web", "graceful"} {
		ids[name] = a.status(name).ContainerStatuses[0].ContainerID
	}

	// The agent restarts: the running containers are adopted as they are.
	a.stop()
	b := startAgent(t, dir)
	b.src <- pods
	for name, id := range ids {
		wait(t, name+" reported again after the agent restarted", func() bool {
			s := b.status(name)
			return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Running != nil
		})
		cs := b.status(name).ContainerStatuses[0]
		if cs.ContainerID != id || cs.RestartCount != 0 {
			t.Errorf("%s after the agent restarted: container %s with %d restarts, want %s with none", name, cs.ContainerID, cs.RestartCount, id)
		}
	}

	// Graceful termination: the pod goes, its container exits 0 on SIGTERM.
	start := time.Now()
	b.src <- []*v1.Pod{never, onFailure, crash, probed, web}
	wait(t, "graceful: its container got SIGTERM", func() bool { _, err := os.Stat(termed); return err == nil })
	wait(t, "graceful: gone", func() bool { return len(mustGlob(t, filepath.Join(dir, "logs", "default_graceful_*"))) == 0 })
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("a container that exits on SIGTERM took %s to go with a 30s grace period", d)
	}
	b.src <- nil
	wait(t, "every pod removed and no container left", func() bool {
		entries, err := os.ReadDir(filepath.Join(dir, "process", "containers"))
		return (err == nil && len(entries) == 0) || errors.Is(err, os.ErrNotExist)
	})
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
