package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
)

// The images hack/containerd.sh imports into every instance.
const (
	busyboxImage = "busybox:1.36"
	webImage     = "nodekit.test/web:1"
	// absentImage is in no store and no registry can serve it.
	absentImage = "nodekit.test/absent:1"
)

// Environment variables the tests read.
const (
	envEndpoint  = "NODEKIT_CRI_ENDPOINT"
	envEndpoint2 = "NODEKIT_CRI2_ENDPOINT"
	envRequired  = "NODEKIT_E2E_REQUIRED"
	envScript    = "NODEKIT_CONTAINERD_SH"
)

// skipOrFail skips the test, or fails it when the environment says the
// end-to-end tests must run (NODEKIT_E2E_REQUIRED=1, as in hack/test.sh).
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(envRequired) == "1" {
		t.Fatalf(format+" (and %s=1)", append(args, envRequired)...)
	}
	t.Skipf(format, args...)
}

// endpointFrom returns the CRI endpoint named by the environment variable,
// or skips the test when there is none.
func endpointFrom(t *testing.T, name string) string {
	t.Helper()
	ep := os.Getenv(name)
	if ep == "" {
		skipOrFail(t, "%s is not set: the end-to-end tests need a containerd; run hack/test.sh as root, or start one with hack/containerd.sh start and export its endpoint", name)
	}
	sock := strings.TrimPrefix(ep, "unix://")
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		skipOrFail(t, "%s=%s: no socket at %s (is containerd running? hack/containerd.sh status)", name, ep, sock)
	}
	return ep
}

// connect returns a CRI client of endpoint, closed when the test ends.
func connect(t *testing.T, endpoint string) *cri.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := cri.New(ctx, endpoint)
	if err != nil {
		t.Fatalf("cri.New(%s): %v", endpoint, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unique returns prefix-XXXXXX, a DNS label no other test run uses.
func unique(prefix string) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

var nonLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// testNamespace is a namespace of the test's own: e2e-<test>-<random>.
func testNamespace(t *testing.T) string {
	n := nonLabel.ReplaceAllString(strings.ToLower(t.Name()), "-")
	n = strings.TrimPrefix(n, "test")
	if len(n) > 40 {
		n = n[:40]
	}
	return unique("e2e-" + strings.Trim(n, "-"))
}

// cleanupContext is for clean-ups, which run after t.Context is done.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// testCgroupRoot returns a node cgroup root of the test's own for its
// agents, nodekit-e2e-XXXXXX: never the agent's default, kubepods, which
// belongs to whatever else runs pods on the host. When the test ends it
// removes the root and everything left below it (pod cgroups of pods that
// were still running when the agent stopped), killing what still runs
// there. Call it before cleanupNamespace, so that its clean-up runs after
// the pods were removed through CRI.
func testCgroupRoot(t *testing.T) string {
	t.Helper()
	root := unique("nodekit-e2e")
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		mgr, err := cgroup.Open("")
		if err != nil {
			t.Errorf("removing the test's cgroup root %s: %v", root, err)
			return
		}
		if err := mgr.Destroy(ctx, root); err != nil {
			t.Errorf("removing the test's cgroup root %s: %v", root, err)
		}
		if mgr.Exists(root) {
			t.Errorf("the test's cgroup root %s is still there", root)
		}
	})
	return root
}

// removeNamespace stops and removes, through CRI, every sandbox and
// container labelled with namespace ns.
func removeNamespace(ctx context.Context, rs runtime.RuntimeService, ns string) error {
	sel := map[string]string{runtime.LabelPodNamespace: ns}
	var errs []error
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return err
	}
	for _, s := range sbs {
		if err := rs.StopPodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, err)
		}
		if err := rs.RemovePodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, err)
		}
	}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := rs.RemoveContainer(ctx, c.Id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d clean-up calls failed, first: %w", len(errs), errs[0])
	}
	return nil
}

// cleanupNamespace removes what the test left in namespace ns when it
// ends, however it ends. Register it before starting agents: clean-ups run
// last-in first-out, so it runs after they stopped.
func cleanupNamespace(t *testing.T, rs runtime.RuntimeService, ns string) {
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := removeNamespace(ctx, rs, ns); err != nil {
			t.Errorf("removing the test's pods from containerd: %v", err)
		}
	})
}

// inNamespace lists the sandboxes and containers of namespace ns.
func inNamespace(t *testing.T, rs runtime.RuntimeService, ns string) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	sel := map[string]string{runtime.LabelPodNamespace: ns}
	sbs, err := rs.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	cs, err := rs.ListContainers(t.Context(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	return sbs, cs
}

// podObjects lists the sandboxes and containers of one pod.
func podObjects(t *testing.T, rs runtime.RuntimeService, uid types.UID) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	sel := map[string]string{runtime.LabelPodUID: string(uid)}
	sbs, err := rs.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	cs, err := rs.ListContainers(t.Context(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	return sbs, cs
}

// eventually polls cond every 100ms until it holds, or fails the test
// after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(start)
}

// logBuffer keeps the agent's log lines, printed when the test fails: all
// of them, or the last max when max > 0.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
	max   int
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		b.lines = append(b.lines, time.Now().Format("15:04:05.000")+" "+prefix+" "+args)
		if b.max > 0 && len(b.lines) >= 2*b.max {
			b.lines = append(b.lines[:0], b.lines[len(b.lines)-b.max:]...)
		}
		b.mu.Unlock()
	}, funcr.Options{Verbosity: 1})
}

// count returns how many lines hold every one of parts.
func (b *logBuffer) count(parts ...string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if containsAll(l, parts) {
			n++
		}
	}
	return n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// clear drops the lines kept so far.
func (b *logBuffer) clear() {
	b.mu.Lock()
	b.lines = nil
	b.mu.Unlock()
}

func (b *logBuffer) dump(t *testing.T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		t.Log(l)
	}
}

// agentConfig is one agent run of a test.
type agentConfig struct {
	nodeName    string
	manifests   string // manifest directory
	podLogsDir  string
	rootDir     string // Options.RootDir
	cgroupRoot  string // Options.Cgroups.Root
	runtime     runtime.RuntimeService
	images      runtime.ImageService
	logs        *logBuffer
	logLines    int // without logs: keep the last logLines lines (0: all)
	customize   func(*nodekit.Options)
	description string // in log dumps
}

// agentRun is a running agent and the statuses it reported.
type agentRun struct {
	t     *testing.T
	agent *nodekit.Agent
	logs  *logBuffer
	stop  func() error

	mu       sync.Mutex
	statuses map[string]v1.PodStatus // by namespace/name
	phases   map[string][]v1.PodPhase
	waiting  map[string]map[string]bool      // pod → waiting reasons seen
	ready    map[string][]v1.ConditionStatus // pod → its Ready condition, each change
}

// startAgent starts an agent that reads static pods from cfg.manifests,
// and stops it when the test ends (if the test did not stop it before).
func startAgent(t *testing.T, cfg agentConfig) *agentRun {
	t.Helper()
	r := &agentRun{
		t:        t,
		statuses: map[string]v1.PodStatus{},
		phases:   map[string][]v1.PodPhase{},
		waiting:  map[string]map[string]bool{},
		ready:    map[string][]v1.ConditionStatus{},
	}
	if cfg.logs == nil {
		cfg.logs = &logBuffer{max: cfg.logLines}
	}
	r.logs = cfg.logs
	log := cfg.logs.logger()
	src, err := file.New(file.Options{Path: cfg.manifests, NodeName: cfg.nodeName, Period: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	opts := nodekit.Options{
		NodeName:            cfg.nodeName,
		Sources:             []nodekit.NamedSource{{Name: sources.FileSource, Source: src}},
		Runtime:             cfg.runtime,
		Images:              cfg.images,
		Logger:              log,
		RuntimeStatusPeriod: time.Second,
		RootDir:             cfg.rootDir,
		Cgroups:             cgroup.PodManagerOptions{Root: cfg.cgroupRoot},
		RuntimeManager: podruntime.Options{
			PodLogsDir: cfg.podLogsDir,
			BackOff:    podruntime.BackOffOptions{Initial: time.Second, Max: 8 * time.Second},
		},
		OnPodStatus: r.observe,
	}
	// Image GC and eviction act on what the shared containerds and the
	// host's disk and memory hold, not on the test's own pods: off by
	// default, so that no result depends on the host. The tests of these
	// parts turn them on in customize.
	opts.NodeResources.GC.DisableImages = true
	opts.NodeResources.Eviction.Disable = true
	if cfg.customize != nil {
		cfg.customize(&opts)
	}
	a, err := nodekit.New(opts)
	if err != nil {
		t.Fatalf("nodekit.New: %v", err)
	}
	r.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(time.Minute):
				runErr = fmt.Errorf("Agent.Run did not return within a minute of its context's end")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Agent.Run (%s): %v", cfg.description, err)
		}
		if t.Failed() {
			t.Logf("--- agent log (%s)", cfg.description)
			cfg.logs.dump(t)
		}
	})
	return r
}

func (r *agentRun) observe(pod *v1.Pod, s v1.PodStatus) {
	key := pod.Namespace + "/" + pod.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses[key] = *s.DeepCopy()
	if ph := r.phases[key]; len(ph) == 0 || ph[len(ph)-1] != s.Phase {
		r.phases[key] = append(ph, s.Phase)
	}
	for _, c := range s.Conditions {
		if c.Type != v1.PodReady {
			continue
		}
		if rh := r.ready[key]; len(rh) == 0 || rh[len(rh)-1] != c.Status {
			r.ready[key] = append(rh, c.Status)
		}
	}
	for _, c := range slices.Concat(s.InitContainerStatuses, s.ContainerStatuses) {
		if w := c.State.Waiting; w != nil && w.Reason != "" {
			if r.waiting[key] == nil {
				r.waiting[key] = map[string]bool{}
			}
			r.waiting[key][w.Reason] = true
		}
	}
}

// readyHistory returns the values pod's Ready condition took, in order,
// each change once.
func (r *agentRun) readyHistory(pod string) []v1.ConditionStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ready[pod])
}

func (r *agentRun) status(pod string) (v1.PodStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.statuses[pod]
	return s, ok
}

// sawWaiting reports whether a container of pod was ever reported waiting
// with reason.
func (r *agentRun) sawWaiting(pod, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting[pod][reason]
}

// running reports whether pod is Running with every container running.
func (r *agentRun) running(pod string) bool {
	s, ok := r.status(pod)
	if !ok || s.Phase != v1.PodRunning || len(s.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range s.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

func (r *agentRun) phase(pod string) v1.PodPhase {
	s, _ := r.status(pod)
	return s.Phase
}

// podUID returns the UID of the agent's pod namespace/name.
func (r *agentRun) podUID(pod string) types.UID {
	for _, p := range r.agent.Pods() {
		if p.Namespace+"/"+p.Name == pod {
			return p.UID
		}
	}
	return ""
}

// writeManifest writes then renames, so the source never reads half a file.
func writeManifest(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// podSpec is a one-container static pod manifest.
type podSpec struct {
	name, namespace string
	restartPolicy   v1.RestartPolicy // default Always
	image           string           // default busybox
	pullPolicy      v1.PullPolicy    // default IfNotPresent
	script          string           // sh -c
	grace           int              // default 5
	hostNetwork     bool
}

func (p podSpec) manifest() string {
	if p.restartPolicy == "" {
		p.restartPolicy = v1.RestartPolicyAlways
	}
	if p.image == "" {
		p.image = busyboxImage
	}
	if p.pullPolicy == "" {
		p.pullPolicy = v1.PullIfNotPresent
	}
	if p.grace == 0 {
		p.grace = 5
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: %d
  hostNetwork: %t
  containers:
  - name: main
    image: %s
    imagePullPolicy: %s
`, p.name, p.namespace, p.restartPolicy, p.grace, p.hostNetwork, p.image, p.pullPolicy)
	if p.script != "" {
		fmt.Fprintf(&b, "    command: [\"sh\", \"-c\", %q]\n", p.script)
	}
	return b.String()
}

// loopScript prints numbered lines until it is told to stop; it exits at
// once on SIGTERM (sleep runs in the background so the trap runs).
const loopScript = `trap "echo stopping; exit 0" TERM; i=0; while true; do echo "line $i"; i=$((i+1)); sleep 0.5 & wait; done`

// sleepScript sleeps until SIGTERM.
const sleepScript = `trap "exit 0" TERM; while true; do sleep 1 & wait; done`

// criCall is one call a countingRuntime saw.
type criCall struct {
	Method string
	ID     string    // sandbox or container ID
	PodUID types.UID // for RunPodSandbox and CreateContainer
	At     time.Time
}

// countingRuntime records the calls that change the runtime's state.
type countingRuntime struct {
	runtime.RuntimeService
	mu    sync.Mutex
	calls []criCall
}

// eventedCountingRuntime also passes container events through.
type eventedCountingRuntime struct {
	*countingRuntime
	events runtime.ContainerEventStreamer
}

func (e eventedCountingRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return e.events.GetContainerEvents(ctx, ch, cb)
}

// newCounting wraps rs; the result streams container events when rs does.
func newCounting(rs runtime.RuntimeService) (runtime.RuntimeService, *countingRuntime) {
	c := &countingRuntime{RuntimeService: rs}
	if es, ok := rs.(runtime.ContainerEventStreamer); ok {
		return eventedCountingRuntime{countingRuntime: c, events: es}, c
	}
	return c, c
}

func (c *countingRuntime) record(call criCall) {
	call.At = time.Now()
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
}

// Calls returns the calls recorded so far.
func (c *countingRuntime) Calls() []criCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func (c *countingRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	id, err := c.RuntimeService.RunPodSandbox(ctx, config, handler)
	c.record(criCall{Method: "RunPodSandbox", ID: id, PodUID: types.UID(config.GetMetadata().GetUid())})
	return id, err
}

func (c *countingRuntime) StopPodSandbox(ctx context.Context, id string) error {
	c.record(criCall{Method: "StopPodSandbox", ID: id})
	return c.RuntimeService.StopPodSandbox(ctx, id)
}

func (c *countingRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	c.record(criCall{Method: "RemovePodSandbox", ID: id})
	return c.RuntimeService.RemovePodSandbox(ctx, id)
}

func (c *countingRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := c.RuntimeService.CreateContainer(ctx, sandboxID, config, sandboxConfig)
	c.record(criCall{Method: "CreateContainer", ID: id, PodUID: types.UID(sandboxConfig.GetMetadata().GetUid())})
	return id, err
}

func (c *countingRuntime) StartContainer(ctx context.Context, id string) error {
	c.record(criCall{Method: "StartContainer", ID: id})
	return c.RuntimeService.StartContainer(ctx, id)
}

func (c *countingRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	c.record(criCall{Method: "StopContainer", ID: id})
	return c.RuntimeService.StopContainer(ctx, id, timeout)
}

func (c *countingRuntime) RemoveContainer(ctx context.Context, id string) error {
	c.record(criCall{Method: "RemoveContainer", ID: id})
	return c.RuntimeService.RemoveContainer(ctx, id)
}

// containerdScript returns the path of hack/containerd.sh, or skips.
func containerdScript(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "starting a containerd of the test's own needs root")
	}
	p := os.Getenv(envScript)
	if p == "" {
		var err error
		if p, err = filepath.Abs("../../hack/containerd.sh"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(p); err != nil {
		skipOrFail(t, "hack/containerd.sh not found (%v); set %s", err, envScript)
	}
	return p
}

// instance is a containerd of the test's own, started by hack/containerd.sh.
type instance struct {
	t        *testing.T
	script   string
	name     string
	version  string
	endpoint string
}

// startInstance starts a throw-away containerd (version "1.6" or "2"),
// stopped and removed when the test ends. Like every test here, it runs
// only where the environment names a containerd of that version (hack/test.sh
// does), which also says that the script can start one.
func startInstance(t *testing.T, version string) *instance {
	t.Helper()
	if version == "2" {
		endpointFrom(t, envEndpoint2)
	} else {
		endpointFrom(t, envEndpoint)
	}
	in := &instance{t: t, script: containerdScript(t), name: unique("e2e"), version: version}
	t.Cleanup(func() {
		out, err := exec.Command(in.script, "stop", "--name", in.name).CombinedOutput()
		if err != nil {
			t.Errorf("hack/containerd.sh stop --name %s: %v\n%s", in.name, err, out)
		}
	})
	in.endpoint = strings.TrimSpace(in.run("start", "--version", version, "--name", in.name))
	return in
}

// run runs hack/containerd.sh with args for this instance and returns its
// standard output.
func (in *instance) run(args ...string) string {
	in.t.Helper()
	start := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(in.script, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		in.t.Fatalf("hack/containerd.sh %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	in.t.Logf("hack/containerd.sh %s: %s (%s)", strings.Join(args, " "), strings.TrimSpace(stderr.String()), time.Since(start).Round(time.Millisecond))
	return stdout.String()
}
