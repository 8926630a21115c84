package process_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/backend"
)

// pod makes a sandbox with a log directory and returns its ID and config.
// It is removed at the end through the runtime *rtp is then.
func pod(t *testing.T, rtp **backend.Runtime) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	rt := *rtp
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-" + strconv.FormatInt(time.Now().UnixNano(), 36)},
		LogDirectory: t.TempDir(),
	}
	id, err := rt.RunPodSandbox(t.Context(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := (*rtp).RemovePodSandbox(context.Background(), id); err != nil && !runtime.IsNotFound(err) {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	return id, cfg
}

func container(t *testing.T, rt *backend.Runtime, sb string, sbCfg *runtimeapi.PodSandboxConfig, workDir string, argv ...string) string {
	t.Helper()
	id, err := rt.CreateContainer(t.Context(), sb, &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: "c"},
		Image:      &runtimeapi.ImageSpec{Image: "busybox"},
		Command:    argv,
		WorkingDir: workDir,
		LogPath:    "c/0.log",
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func status(t *testing.T, rt *backend.Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := rt.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status
}

// processInfo reads the PIDs the container's monitor recorded.
func processInfo(t *testing.T, dir, id string) (pid, monitor int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "containers", id, "process.json"))
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) int {
		s := string(data)
		i := strings.Index(s, `"`+name+`":`)
		if i < 0 {
			t.Fatalf("process.json %s has no %s", s, name)
		}
		s = s[i+len(name)+3:]
		n, _ := strconv.Atoi(s[:strings.IndexAny(s, ",}")])
		return n
	}
	return field("PID"), field("MonitorPID")
}

// gone reports whether no process of the group runs any more (zombies
// waiting for init to reap them have ended).
func gone(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// f[0] is the state, f[2] the process group.
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartErrors(t *testing.T) {
	rt := newRuntime(t, t.TempDir())
	t.Cleanup(func() { rt.Close() })
	sb, cfg := pod(t, &rt)
	for _, tc := range []struct {
		name    string
		workDir string
		argv    []string
		want    string
	}{
		{"missing command", "", []string{"no-such-command-nodekit"}, `"no-such-command-nodekit": executable file not found in $PATH`},
		{"missing path", "", []string{"/no/such/file"}, "no such file or directory"},
		{"missing working directory", "/no/such/dir", []string{"true"}, "working directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := container(t, rt, sb, cfg, tc.workDir, tc.argv...)
			err := rt.StartContainer(t.Context(), id)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartContainer: err = %v, want one saying %q", err, tc.want)
			}
			st := status(t, rt, id)
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 128 || st.Reason != "StartError" || !strings.Contains(st.Message, tc.want) {
				t.Errorf("status: %s %d %q %q; want exited 128 StartError with the message", st.State, st.ExitCode, st.Reason, st.Message)
			}
		})
	}
}

// TestExitWhileAgentDown: a container that ends while no runtime watches
// reports its exit code to the next one; one still running is adopted.
func TestExitWhileAgentDown(t *testing.T) {
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	t.Cleanup(func() { rt.Close() })
	sb, cfg := pod(t, &rt)
	short := container(t, rt, sb, cfg, "", "sleep", "3600")
	long := container(t, rt, sb, cfg, "", "sleep", "3600")
	for _, id := range []string{short, long} {
		if err := rt.StartContainer(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	startedAt := status(t, rt, long).StartedAt
	rt.Close()

	pid, monitor := processInfo(t, dir, short)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the monitor of the container ends", func() bool { return gone(monitor) })

	rt = newRuntime(t, dir)
	if st := status(t, rt, short); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 {
		t.Errorf("the container killed while the runtime was down: %s exit code %d, want exited 143", st.State, st.ExitCode)
	}
	if st := status(t, rt, long); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt != startedAt {
		t.Errorf("the container running across the restart: %s started %d, want running started %d", st.State, st.StartedAt, startedAt)
	}
}

// TestMonitorKilled: a killed monitor takes its process with it, and the
// container reports exit code 137 with a message that says why.
func TestMonitorKilled(t *testing.T) {
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	t.Cleanup(func() { rt.Close() })
	sb, cfg := pod(t, &rt)
	id := container(t, rt, sb, cfg, "", "sh", "-c", "sleep 3600 & sleep 3600")
	if err := rt.StartContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	pid, monitor := processInfo(t, dir, id)
	if err := syscall.Kill(monitor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container exits", func() bool {
		return status(t, rt, id).State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	st := status(t, rt, id)
	if st.ExitCode != 137 || !strings.Contains(st.Message, "monitor") {
		t.Errorf("exit code %d message %q; want 137 and a message about the monitor", st.ExitCode, st.Message)
	}
	eventually(t, "no process of the container is left", func() bool { return gone(pid) })
}

// TestNoStrayProcess: removing a pod leaves no process of its containers,
// not even children in the background or ones that ignore SIGTERM.
func TestNoStrayProcess(t *testing.T) {
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	t.Cleanup(func() { rt.Close() })
	sb, cfg := pod(t, &rt)
	id := container(t, rt, sb, cfg, "", "sh", "-c", `trap "" TERM; sleep 3600 & sleep 3600 & wait`)
	if err := rt.StartContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	pid, monitor := processInfo(t, dir, id)
	if err := rt.StopPodSandbox(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodSandbox(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) || !gone(monitor) {
		t.Errorf("processes left after the pod was removed: group %v, monitor %v", !gone(pid), !gone(monitor))
	}
	if _, err := os.Stat(filepath.Join(dir, "containers", id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the container's directory is left: %v", err)
	}
}

// TestCancelledStartLeavesNoProcess: a StartContainer whose context ends
// while the monitor is starting the process (a pod deleted during its
// start) returns the context's error and leaves no process running, with
// the container exited; the monitor, which goes on by itself, has been
// waited for.
func TestCancelledStartLeavesNoProcess(t *testing.T) {
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	t.Cleanup(func() { rt.Close() })
	sb, cfg := pod(t, &rt)
	for i := range 5 {
		id := container(t, rt, sb, cfg, "", "sleep", "3600")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := rt.StartContainer(ctx, id); !errors.Is(err, context.Canceled) {
			t.Fatalf("StartContainer with a cancelled context: %v, want context.Canceled", err)
		}
		if n := processesOf(filepath.Join(dir, "containers", id)); n != 0 {
			t.Errorf("start %d: %d processes of the container run after its start was cancelled", i, n)
		}
		if st := status(t, rt, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("start %d: the container is %s, want exited", i, st.State)
		}
	}
}

// processesOf counts the processes, zombies aside, whose command line
// names the container's directory (its monitor) or that run in the group
// its monitor recorded.
func processesOf(containerDir string) int {
	pgid := 0
	if data, err := os.ReadFile(filepath.Join(containerDir, "process.json")); err == nil {
		s := string(data)
		if i := strings.Index(s, `"PID":`); i >= 0 {
			s = s[i+len(`"PID":`):]
			pgid, _ = strconv.Atoi(s[:strings.IndexAny(s, ",}")])
		}
	}
	n := 0
	if pgid > 0 && !gone(pgid) {
		n++
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i < 0 || strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z") {
			continue
		}
		if strings.Contains(string(cmd), containerDir) {
			n++
		}
	}
	return n
}
