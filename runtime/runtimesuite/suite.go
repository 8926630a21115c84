package runtimesuite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Config is what the suite needs of a runtime.
type Config struct {
	// Runtime is the runtime under test. Required.
	Runtime runtime.RuntimeService
	// Images is its image service. Defaults to Runtime when it is one.
	Images runtime.ImageService
	// Image is the image of every container the suite creates; it must be
	// present (the suite never pulls: a CRI pull always asks a registry)
	// and have /bin/sh. Defaults to "busybox:1.36".
	Image string
	// Processes says the runtime really runs the containers' commands in
	// a POSIX shell: the suite then checks logs, exec output and exit
	// codes, environment and working directory, signals and stop
	// timeouts. Without it only the lifecycle checks that a simulated
	// runtime (runtimetest: sleep, exit, true, false) can pass run.
	Processes bool
	// Restart, when set, stands for a restart of the agent: it returns a
	// new RuntimeService on the same runtime state (closing the old one
	// if it must), which must find the sandboxes and containers again,
	// running ones still running with the same IDs and start times.
	// Defaults to nil: the restart check is skipped.
	Restart func(t *testing.T) runtime.RuntimeService
	// StopTimeout is the longest a stop of a container that ignores
	// SIGTERM may take beyond its grace period. Defaults to 20s.
	StopTimeout time.Duration
}

// Run runs the conformance suite, one subtest per check. setup is called
// by each subtest for the Config it uses: it may return the same runtime
// every time (the subtests make pods of their own, with unique names and
// UIDs, and remove them) or a fresh one.
func Run(t *testing.T, setup func(t *testing.T) Config) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			cfg := setup(t)
			if cfg.Runtime == nil {
				t.Fatal("runtimesuite: Config.Runtime is nil")
			}
			if cfg.Images == nil {
				cfg.Images, _ = cfg.Runtime.(runtime.ImageService)
			}
			if cfg.Image == "" {
				cfg.Image = "busybox:1.36"
			}
			if cfg.StopTimeout <= 0 {
				cfg.StopTimeout = 20 * time.Second
			}
			if c.processes && !cfg.Processes {
				t.Skip("the runtime does not run real processes (Config.Processes is false)")
			}
			s := &suite{Config: cfg, t: t}
			s.checkImage()
			c.run(s)
		})
	}
}

var checks = []struct {
	name      string
	processes bool
	run       func(*suite)
}{
	{"SandboxLifecycle", false, testSandboxLifecycle},
	{"ContainerLifecycle", false, testContainerLifecycle},
	{"ExitCodes", false, testExitCodes},
	{"NotFound", false, testNotFound},
	{"IdempotentStopRemove", false, testIdempotent},
	{"ListFilters", false, testListFilters},
	{"LabelsAnnotations", false, testLabelsAnnotations},
	{"Events", false, testEvents},
	{"ExecSync", false, testExecSync},
	{"ExecSyncExitCodeTimeout", true, testExecSyncReal},
	{"Logs", true, testLogs},
	{"EnvWorkingDir", true, testEnvWorkingDir},
	{"StopGraceful", true, testStopGraceful},
	{"StopTimeout", true, testStopTimeout},
	{"RestartRecovery", false, testRestart},
}

// suite holds one subtest's state.
type suite struct {
	Config
	t *testing.T
}

// ctx is the context of one call: the test's, with a generous timeout.
func (s *suite) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.t.Context(), 2*time.Minute)
}

func (s *suite) checkImage() {
	if s.Images == nil {
		s.t.Fatal("runtimesuite: Config.Images is nil and Runtime is no ImageService")
	}
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: s.Image}, false)
	if err != nil {
		s.t.Fatalf("ImageStatus(%s): %v", s.Image, err)
	}
	if resp.GetImage() == nil {
		s.t.Fatalf("image %s is not present: the suite needs it present (it never pulls)", s.Image)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sandbox is a pod sandbox the suite made.
type sandbox struct {
	id     string
	config *runtimeapi.PodSandboxConfig
}

// newSandbox runs a host-network sandbox with a log directory of its own,
// removed when the test ends.
func (s *suite) newSandbox(labels, annotations map[string]string) *sandbox {
	s.t.Helper()
	name := "suite-" + randomHex(4)
	uid := randomHex(16)
	logDir := filepath.Join(s.t.TempDir(), "default_"+name+"_"+uid)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "runtimesuite", Uid: uid},
		LogDirectory: logDir,
		Labels:       map[string]string{runtime.LabelPodUID: uid, runtime.LabelPodName: name, runtime.LabelPodNamespace: "runtimesuite"},
		Annotations:  annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	for k, v := range labels {
		cfg.Labels[k] = v
	}
	ctx, cancel := s.ctx()
	defer cancel()
	id, err := s.Runtime.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		s.t.Fatalf("RunPodSandbox: %v", err)
	}
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// s.Runtime, not the one of now: Restart replaces it.
		if err := s.Runtime.RemovePodSandbox(ctx, id); err != nil && !runtime.IsNotFound(err) {
			s.t.Errorf("clean-up: RemovePodSandbox(%s): %v", id, err)
		}
	})
	return &sandbox{id: id, config: cfg}
}

// containerOpts are the optional parts of a container config.
type containerOpts struct {
	env         map[string]string
	workingDir  string
	labels      map[string]string
	annotations map[string]string
}

// create creates a container running script in sh.
func (s *suite) create(sb *sandbox, name, script string, o containerOpts) string {
	s.t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: name},
		Image:       &runtimeapi.ImageSpec{Image: s.Image},
		Command:     []string{"sh", "-c", script},
		WorkingDir:  o.workingDir,
		LogPath:     name + "/0.log",
		Labels:      map[string]string{runtime.LabelPodUID: sb.config.Metadata.Uid, runtime.LabelContainerName: name},
		Annotations: o.annotations,
	}
	for k, v := range o.labels {
		cfg.Labels[k] = v
	}
	for k, v := range o.env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	ctx, cancel := s.ctx()
	defer cancel()
	id, err := s.Runtime.CreateContainer(ctx, sb.id, cfg, sb.config)
	if err != nil {
		s.t.Fatalf("CreateContainer(%s): %v", name, err)
	}
	return id
}

func (s *suite) start(id string) {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.Runtime.StartContainer(ctx, id); err != nil {
		s.t.Fatalf("StartContainer(%s): %v", id, err)
	}
}

// run creates and starts a container.
func (s *suite) run(sb *sandbox, name, script string, o containerOpts) string {
	s.t.Helper()
	id := s.create(sb, name, script, o)
	s.start(id)
	return id
}

func (s *suite) status(id string) *runtimeapi.ContainerStatus {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		s.t.Fatalf("ContainerStatus(%s): %v", id, err)
	}
	if resp.GetStatus() == nil {
		s.t.Fatalf("ContainerStatus(%s): no status", id)
	}
	return resp.GetStatus()
}

func (s *suite) sandboxStatus(id string) *runtimeapi.PodSandboxStatus {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		s.t.Fatalf("PodSandboxStatus(%s): %v", id, err)
	}
	return resp.GetStatus()
}

// waitExited polls the container's status until it has exited, for up to
// a minute (a loaded machine starts processes slowly), and returns it.
func (s *suite) waitExited(id string) *runtimeapi.ContainerStatus {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := s.status(id)
		if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("container %s still %s after a minute", id, st.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *suite) stop(id string, timeout int64) {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.Runtime.StopContainer(ctx, id, timeout); err != nil {
		s.t.Fatalf("StopContainer(%s, %d): %v", id, timeout, err)
	}
}

// logLine is one line of a CRI log file.
var logLine = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

// readLog reads a container's log file and returns its lines as "stream
// tag content", checking the format and that times do not go back within a
// stream. Across streams they may: containerd stamps each stream's lines in
// the stream's own goroutine before they share the file's lock, so a stderr
// line stamped later can be written before a stdout line stamped earlier.
func (s *suite) readLog(path string) []string {
	s.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("read log: %v", err)
	}
	var out []string
	last := map[string]time.Time{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		m := logLine.FindStringSubmatch(line)
		if m == nil {
			s.t.Fatalf("log line %q is not in the CRI log format", line)
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			s.t.Fatalf("log line %q: time: %v", line, err)
		}
		if ts.Before(last[m[2]]) {
			s.t.Errorf("log line %q: time goes back from %s on %s", line, last[m[2]], m[2])
		}
		last[m[2]] = ts
		out = append(out, m[2]+" "+m[3]+" "+m[4])
	}
	return out
}

func readFileIfExists(path string) ([]byte, error) { return os.ReadFile(path) }
