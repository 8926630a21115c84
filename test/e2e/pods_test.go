package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// fixture is what every test starts from: a CRI client of a containerd, a
// namespace and node name of the test's own, a manifest directory, a pod
// log directory, and the agent's root directory and cgroup root.
type fixture struct {
	t          *testing.T
	endpoint   string
	cri        *cri.Client
	ns         string
	node       string
	dir        string
	logsDir    string
	rootDir    string // Options.RootDir: pod directories and volumes
	cgroupRoot string // Options.Cgroups.Root, e.g. nodekit-e2e-1a2b3c
	logLines   int    // the agents keep the last logLines log lines (0: all)
}

// newFixture connects to the containerd the environment variable names
// (skipping when there is none) and removes the test's pods when it ends.
func newFixture(t *testing.T, endpointVar string) *fixture {
	t.Helper()
	return newFixtureAt(t, endpointFrom(t, endpointVar))
}

func newFixtureAt(t *testing.T, endpoint string) *fixture {
	t.Helper()
	// Registered first, so it runs after every other clean-up: the agents
	// have stopped and the client is closed by then.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) })
	f := &fixture{
		t:        t,
		endpoint: endpoint,
		cri:      connect(t, endpoint),
		ns:       testNamespace(t),
		node:     unique("node"),
		dir:      t.TempDir(),
		logsDir:  t.TempDir(),
		rootDir:  t.TempDir(),
	}
	f.cgroupRoot = testCgroupRoot(t)
	cleanupNamespace(t, f.cri, f.ns)
	return f
}

// agent starts an agent on the fixture's runtime (or rs when given), with
// the fixture's node name, manifests and pod log directory.
func (f *fixture) agent(rs runtime.RuntimeService, description string) *agentRun {
	f.t.Helper()
	return f.agentWith(rs, description, nil)
}

func (f *fixture) agentWith(rs runtime.RuntimeService, description string, customize func(*nodekit.Options)) *agentRun {
	f.t.Helper()
	if rs == nil {
		rs = f.cri
	}
	return startAgent(f.t, agentConfig{
		nodeName:    f.node,
		manifests:   f.dir,
		podLogsDir:  f.logsDir,
		rootDir:     f.rootDir,
		cgroupRoot:  f.cgroupRoot,
		runtime:     rs,
		images:      f.cri,
		customize:   customize,
		description: description,
		logLines:    f.logLines,
	})
}

// pod returns the full name the agent gives the static pod name.
func (f *fixture) pod(name string) string { return f.ns + "/" + name + "-" + f.node }

func (f *fixture) write(p podSpec) {
	f.t.Helper()
	p.namespace = f.ns
	writeManifest(f.t, f.dir, p.name+".yaml", p.manifest())
}

func (f *fixture) remove(name string) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.dir, name+".yaml")); err != nil {
		f.t.Fatal(err)
	}
}

// expectNothingLeft fails unless containerd holds nothing of the test's
// namespace.
func (f *fixture) expectNothingLeft() {
	f.t.Helper()
	sbs, cs := inNamespace(f.t, f.cri, f.ns)
	if len(sbs) != 0 || len(cs) != 0 {
		f.t.Errorf("containerd still holds %d sandboxes and %d containers of the test", len(sbs), len(cs))
	}
}

var criLogLine = regexp.MustCompile(`^\S+ (stdout|stderr) [FP] (.*)$`)

// readCRILog returns the stdout lines of a CRI log file.
func readCRILog(t *testing.T, path string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		m := criLogLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Errorf("%s: line %q is not in the CRI log format", path, sc.Text())
			continue
		}
		if m[1] == "stdout" {
			out = append(out, m[2])
		}
	}
	return out
}

// TestStaticPod: a static pod (busybox printing lines in a loop) in the
// manifest directory runs in containerd: a ready sandbox and a running
// container, pod status Running with the container's ID and start times,
// and the lines it printed in its CRI log file under PodLogsDir.
func TestStaticPod(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "static pod")
	start := time.Now()
	f.write(podSpec{name: "loop", script: loopScript})
	pod := f.pod("loop")
	took := eventually(t, 30*time.Second, pod+" Running", func() bool { return a.running(pod) })
	t.Logf("manifest written → pod Running: %s", took.Round(time.Millisecond))

	uid := a.podUID(pod)
	sbs, cs := podObjects(t, f.cri, uid)
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandboxes of the pod = %v, want one ready", sbs)
	}
	if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("containers of the pod = %v, want one running", cs)
	}
	if got := cs[0].Labels[runtime.LabelContainerName]; got != "main" {
		t.Errorf("container label %s = %q, want main", runtime.LabelContainerName, got)
	}
	if cs[0].PodSandboxId != sbs[0].Id {
		t.Errorf("container's sandbox = %s, want %s", cs[0].PodSandboxId, sbs[0].Id)
	}

	s, _ := a.status(pod)
	c := s.ContainerStatuses[0]
	if want := "containerd://" + cs[0].Id; c.ContainerID != want {
		t.Errorf("status container ID = %q, want %q", c.ContainerID, want)
	}
	if s.StartTime == nil || s.StartTime.Time.Before(start.Add(-time.Second)) {
		t.Errorf("pod start time = %v, want one after the manifest was written (%v)", s.StartTime, start)
	}
	if c.State.Running.StartedAt.Time.Before(start.Add(-time.Second)) {
		t.Errorf("container started at %v, want after %v", c.State.Running.StartedAt, start)
	}
	if !c.Ready || c.RestartCount != 0 || c.Started == nil || !*c.Started {
		t.Errorf("container status = %+v, want ready with no restart", c)
	}
	st, err := f.cri.PodSandboxStatus(t.Context(), sbs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if ip := st.GetStatus().GetNetwork().GetIp(); ip == "" || len(s.PodIPs) == 0 || s.PodIPs[0].IP != ip {
		t.Errorf("pod IPs = %v, want the sandbox's IP %q", s.PodIPs, ip)
	}

	logPath := filepath.Join(f.logsDir, fmt.Sprintf("%s_%s_%s", f.ns, "loop-"+f.node, uid), "main", "0.log")
	eventually(t, 10*time.Second, "3 lines in "+logPath, func() bool { return len(readCRILog(t, logPath)) >= 3 })
	lines := readCRILog(t, logPath)
	for i, l := range lines[:3] {
		if want := fmt.Sprintf("line %d", i); l != want {
			t.Errorf("log line %d = %q, want %q", i, l, want)
		}
	}
	// The log file is the one containerd writes for this container.
	cst, err := f.cri.ContainerStatus(t.Context(), cs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := cst.GetStatus().GetLogPath(); got != logPath {
		t.Errorf("container log path = %q, want %q", got, logPath)
	}
}

// TestRestartPolicies: a container exiting non-zero with restartPolicy
// Always is restarted with a growing back-off (CrashLoopBackOff between
// restarts); with Never it stays exited and the pod fails; with OnFailure a
// container exiting 0 makes the pod succeed.
func TestRestartPolicies(t *testing.T) {
	f := newFixture(t, envEndpoint)
	rs, calls := newCounting(f.cri)
	a := f.agent(rs, "restart policies")
	f.write(podSpec{name: "always", restartPolicy: v1.RestartPolicyAlways, script: "echo crashing; exit 3"})
	f.write(podSpec{name: "never", restartPolicy: v1.RestartPolicyNever, script: "echo failing; exit 2"})
	f.write(podSpec{name: "onfailure", restartPolicy: v1.RestartPolicyOnFailure, script: "echo done; exit 0"})

	t.Run("Never", func(t *testing.T) {
		pod := f.pod("never")
		eventually(t, 30*time.Second, pod+" Failed", func() bool { return a.phase(pod) == v1.PodFailed })
		s, _ := a.status(pod)
		term := s.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != 2 || term.Reason != "Error" {
			t.Errorf("container state = %+v, want terminated with exit code 2 and reason Error", s.ContainerStatuses[0].State)
		}
		// It stays exited: no second container, ever.
		time.Sleep(3 * time.Second)
		_, cs := podObjects(t, f.cri, a.podUID(pod))
		if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("containers = %v, want the one exited container", cs)
		}
		if s, _ := a.status(pod); s.Phase != v1.PodFailed || s.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("status = phase %s, restarts %d; want Failed with no restart", s.Phase, s.ContainerStatuses[0].RestartCount)
		}
	})

	t.Run("OnFailure exit 0", func(t *testing.T) {
		pod := f.pod("onfailure")
		eventually(t, 30*time.Second, pod+" Succeeded", func() bool { return a.phase(pod) == v1.PodSucceeded })
		s, _ := a.status(pod)
		term := s.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			t.Errorf("container state = %+v, want terminated with exit code 0 and reason Completed", s.ContainerStatuses[0].State)
		}
		_, cs := podObjects(t, f.cri, a.podUID(pod))
		if len(cs) != 1 {
			t.Errorf("containers = %v, want one (no restart)", cs)
		}
	})

	t.Run("Always", func(t *testing.T) {
		pod := f.pod("always")
		eventually(t, 40*time.Second, pod+" restarted 4 times", func() bool {
			s, _ := a.status(pod)
			return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].RestartCount >= 4
		})
		if !a.sawWaiting(pod, "CrashLoopBackOff") {
			t.Errorf("never saw the container waiting in CrashLoopBackOff")
		}
		if ph := a.phase(pod); ph != v1.PodRunning {
			t.Errorf("phase = %s, want Running (a restarting pod stays Running)", ph)
		}
		// The back-off grows (1s, 2s, 4s, ...; the first restart is at
		// once): the gaps between the starts of successive containers.
		uid := a.podUID(pod)
		var starts []time.Time
		for _, c := range calls.Calls() {
			if c.Method == "CreateContainer" && c.PodUID == uid {
				starts = append(starts, c.At)
			}
		}
		var gaps []time.Duration
		for i := 1; i < len(starts); i++ {
			gaps = append(gaps, starts[i].Sub(starts[i-1]).Round(10*time.Millisecond))
		}
		t.Logf("gaps between the creations of successive containers: %v", gaps)
		// Load only lengthens a gap: the last one is at least its
		// back-off (4s or more), and it exceeds the shortest before it,
		// the least slowed of them, by more than a constant delay would.
		if n := len(gaps); n < 4 || gaps[n-1] < 3*time.Second || gaps[n-1] < slices.Min(gaps[:n-1])+time.Second {
			t.Errorf("gaps between restarts %v do not grow as a 1s, 2s, 4s back-off", gaps)
		}
		// The kubelet keeps the last dead container beside the running one.
		_, cs := podObjects(t, f.cri, uid)
		if len(cs) > 2 {
			t.Errorf("%d containers of the pod in containerd, want at most 2 (dead ones pruned)", len(cs))
		}
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			if got, _ := strconv.Atoi(c.Annotations[runtime.AnnotationRestartCount]); got < 3 {
				t.Errorf("container %s has restart count annotation %d, want at least 3", c.Id, got)
			}
		}
	})
}

// TestManifestEditAndRemoval: editing a manifest replaces the pod's
// container (a static pod's UID follows its content, so a new pod replaces
// the old one); removing it stops the container within the pod's grace
// period and removes container and sandbox; nothing is left in containerd.
func TestManifestEditAndRemoval(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "edit and removal")
	pod := f.pod("web")
	// The container ignores SIGTERM, so stopping it takes the grace
	// period: proof that the grace period is given, and not exceeded.
	const grace = 3
	ignoreTerm := `trap "" TERM; echo version %d; while true; do sleep 1; done`
	f.write(podSpec{name: "web", script: fmt.Sprintf(ignoreTerm, 1), grace: grace})
	eventually(t, 30*time.Second, pod+" Running", func() bool { return a.running(pod) })
	uid1 := a.podUID(pod)
	sbs1, cs1 := podObjects(t, f.cri, uid1)
	if len(sbs1) != 1 || len(cs1) != 1 {
		t.Fatalf("first version: %d sandboxes, %d containers; want 1 and 1", len(sbs1), len(cs1))
	}

	f.write(podSpec{name: "web", script: fmt.Sprintf(ignoreTerm, 2), grace: grace})
	took := eventually(t, 30*time.Second, "the edited pod running and the old one gone", func() bool {
		uid2 := a.podUID(pod)
		if uid2 == "" || uid2 == uid1 || !a.running(pod) {
			return false
		}
		sbs, cs := podObjects(t, f.cri, uid1)
		return len(sbs) == 0 && len(cs) == 0
	})
	t.Logf("edit → old pod removed, new one running: %s", took.Round(time.Millisecond))
	uid2 := a.podUID(pod)
	sbs2, cs2 := podObjects(t, f.cri, uid2)
	if len(sbs2) != 1 || len(cs2) != 1 || cs2[0].Id == cs1[0].Id || cs2[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after the edit: sandboxes %v, containers %v; want one new running container", sbs2, cs2)
	}
	if s, _ := a.status(pod); !strings.HasSuffix(s.ContainerStatuses[0].ContainerID, cs2[0].Id) {
		t.Errorf("status names container %s, want %s", s.ContainerStatuses[0].ContainerID, cs2[0].Id)
	}
	// The old container went through the grace period: it was stopped by
	// SIGKILL after SIGTERM was ignored.
	removed := time.Now()
	f.remove("web")
	var stoppedAfter time.Duration
	eventually(t, 30*time.Second, "the container to stop", func() bool {
		_, cs := podObjects(t, f.cri, uid2)
		if len(cs) == 1 && cs[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return false
		}
		stoppedAfter = time.Since(removed)
		return true
	})
	took = eventually(t, 30*time.Second, "container and sandbox removed", func() bool {
		sbs, cs := podObjects(t, f.cri, uid2)
		return len(sbs) == 0 && len(cs) == 0
	})
	t.Logf("manifest removed → container stopped after %s, everything removed %s later", stoppedAfter.Round(time.Millisecond), took.Round(time.Millisecond))
	// The lower bound is the rule; the upper one leaves a loaded machine
	// room and is still far below the default grace period of 30s.
	if stoppedAfter < (grace-1)*time.Second || stoppedAfter > (grace+20)*time.Second {
		t.Errorf("the container stopped %s after the manifest's removal; want about its grace period, %ds", stoppedAfter, grace)
	}
	f.expectNothingLeft()
}

// TestImageAbsent: a pod whose image is in no store and cannot be pulled
// shows ErrImagePull, then ImagePullBackOff; the other pods run.
func TestImageAbsent(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "image absent")
	f.write(podSpec{name: "absent", image: absentImage})
	f.write(podSpec{name: "never", image: absentImage, pullPolicy: v1.PullNever})
	f.write(podSpec{name: "fine", script: sleepScript})

	fine, absent, never := f.pod("fine"), f.pod("absent"), f.pod("never")
	eventually(t, 30*time.Second, fine+" Running", func() bool { return a.running(fine) })
	eventually(t, 60*time.Second, absent+" in ErrImagePull then ImagePullBackOff", func() bool {
		return a.sawWaiting(absent, "ErrImagePull") && a.sawWaiting(absent, "ImagePullBackOff")
	})
	s, _ := a.status(absent)
	if s.Phase != v1.PodPending {
		t.Errorf("phase = %s, want Pending", s.Phase)
	}
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || !strings.Contains(w.Message, "nodekit.test/absent") {
		t.Errorf("waiting state = %+v, want a message naming the image", s.ContainerStatuses[0].State)
	} else {
		t.Logf("waiting: %s: %s", w.Reason, w.Message)
	}
	eventually(t, 30*time.Second, never+" in ErrImageNeverPull", func() bool { return a.sawWaiting(never, "ErrImageNeverPull") })
	if !a.running(fine) {
		t.Errorf("%s no longer runs", fine)
	}
	if _, cs := podObjects(t, f.cri, a.podUID(absent)); len(cs) != 0 {
		t.Errorf("the pod with an absent image has containers: %v", cs)
	}
}
