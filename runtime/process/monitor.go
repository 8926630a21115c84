package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	sysruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/runtime/backend"
)

// monitorArg is the first argument of a monitor process; detachedArg the
// second of the monitor proper (the first one only starts it and exits, so
// that the monitor is nobody's child but init's and survives the agent).
const (
	monitorArg  = "nodekit-process-monitor"
	detachedArg = "detached"
	// initArg, as the second argument, runs the init of a container in an
	// image (containerInit).
	initArg = "init"
	// monitorEnv is set in the environment of a monitor process, so that
	// a binary that forgot to call RunMonitor does not run a second agent.
	monitorEnv = "NODEKIT_PROCESS_MONITOR"
)

// The files of a container's directory.
const (
	specFile    = "spec.json"    // written by the agent before the monitor starts
	procFile    = "process.json" // written by the monitor once the process runs
	exitFile    = "exit.json"    // written by the monitor once the process exited
	monitorLog  = "monitor.log"  // the monitor's own errors
	syncMessage = 3              // fd of the pipe to the agent in the monitor
)

// spec is what the monitor reads: how to run the process.
type spec struct {
	Argv         []string
	Env          []string
	WorkingDir   string
	LogPath      string
	CgroupParent string // "" when the container gets no cgroup
	// Rootfs is the unpacked image the container runs chrooted into, in
	// namespaces of its own (mount, PID, UTS, IPC), with Hostname; ""
	// runs the command on the host.
	Rootfs   string `json:",omitempty"`
	Hostname string `json:",omitempty"`
	// Mounts are bind mounts into the image's file system.
	Mounts []bindMount `json:",omitempty"`
}

// bindMount is a host path mounted into a container's image.
type bindMount struct {
	Host, Container string
	Readonly        bool
}

// procInfo identifies the running process and its monitor. A PID is only
// trusted with its start time (field 22 of /proc/PID/stat), so that a
// reused PID is never signalled.
type procInfo struct {
	PID          int
	PIDStart     uint64
	MonitorPID   int
	MonitorStart uint64
	StartedAt    time.Time
}

// exitInfo is how the process ended.
type exitInfo struct {
	ExitCode   int32
	Reason     string
	Message    string
	FinishedAt time.Time
}

// startMessage is what the monitor tells the agent once the process has
// started, or why it could not.
type startMessage struct {
	Proc  *procInfo `json:",omitempty"`
	Error string    `json:",omitempty"`
}

// RunMonitor runs the container monitor when this process was started as
// one by a process Backend, and then exits the process; otherwise it
// returns at once. A program that uses the process runtime with the
// default Options.MonitorCommand (its own executable) calls it first thing
// in main, before flags are parsed, as a test binary does in TestMain:
//
//	func main() {
//		process.RunMonitor()
//		...
//	}
func RunMonitor() {
	if len(os.Args) < 3 || os.Args[1] != monitorArg {
		return
	}
	if len(os.Args) >= 4 && os.Args[3] == detachedArg {
		os.Exit(monitor(os.Args[2]))
	}
	if len(os.Args) >= 4 && os.Args[3] == initArg {
		os.Exit(containerInit(os.Args[2]))
	}
	os.Exit(launch(os.Args[2]))
}

// launch starts the detached monitor in a session of its own, hands it the
// pipe to the agent, and exits, so that init adopts it.
func launch(dir string) int {
	syncw := os.NewFile(syncMessage, "sync")
	exe, err := os.Executable()
	if err != nil {
		report(syncw, startMessage{Error: "process monitor: " + err.Error()})
		return 1
	}
	logf, err := os.OpenFile(filepath.Join(dir, monitorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		report(syncw, startMessage{Error: "process monitor: " + err.Error()})
		return 1
	}
	cmd := exec.Command(exe, monitorArg, dir, detachedArg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{syncw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		report(syncw, startMessage{Error: "process monitor: " + err.Error()})
		return 1
	}
	return 0
}

func report(w io.WriteCloser, m startMessage) {
	_ = json.NewEncoder(w).Encode(m)
	_ = w.Close()
}

// monitor starts the container's process, copies its output to the log
// file, waits for it, kills what is left of its process group, and writes
// the exit status. Its exit code is 0 once the status is written.
func monitor(dir string) int {
	syscall.CloseOnExec(syncMessage) // not for the container's process
	syncw := os.NewFile(syncMessage, "sync")
	fail := func(format string, args ...any) int {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintln(os.Stderr, "process monitor:", msg)
		report(syncw, startMessage{Error: msg})
		return 1
	}
	var sp spec
	if err := readJSON(filepath.Join(dir, specFile), &sp); err != nil {
		return fail("read spec: %v", err)
	}
	if len(sp.Argv) == 0 {
		return fail("no command")
	}
	var cg cgroup.Manager
	var ctrCgroup string // the container's own cgroup, below the pod's
	if sp.CgroupParent != "" {
		// The monitor joins the container's cgroup first: the process it
		// starts is born there.
		var err error
		cg, err = cgroup.Open("")
		if err == nil {
			ctrCgroup, err = joinContainerCgroup(cg, sp.CgroupParent, filepath.Base(dir))
		}
		if err != nil {
			return fail("join cgroup %s: %v", sp.CgroupParent, err)
		}
		defer func() {
			// Out of it first (a start that failed left the monitor
			// there), then what is left in it is killed and it goes.
			_ = leaveContainerCgroup(cg)
			_ = destroyContainerCgroup(context.Background(), cg, ctrCgroup)
		}()
	}
	var path string
	if sp.Rootfs == "" {
		var err error
		path, err = lookPath(sp.Argv[0], sp.Env)
		if err != nil {
			return fail("%v", err)
		}
	}
	if sp.WorkingDir != "" && sp.Rootfs == "" {
		if fi, err := os.Stat(sp.WorkingDir); err != nil {
			return fail("working directory: %v", err)
		} else if !fi.IsDir() {
			return fail("working directory %s is not a directory", sp.WorkingDir)
		}
	}

	var logs []io.Closer
	var stdout, stderr io.Writer = io.Discard, io.Discard
	if sp.LogPath != "" {
		f, err := backend.OpenLogFile(sp.LogPath)
		if err != nil {
			return fail("open log file: %v", err)
		}
		o, e := backend.NewLogWriter(f, "stdout"), backend.NewLogWriter(f, "stderr")
		stdout, stderr = o, e
		logs = append(logs, o, e, f)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail("pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail("pipe: %v", err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fail("%v", err)
	}

	// The thread that starts the process stays until the monitor exits:
	// Pdeathsig fires when that thread ends, killing the process if the
	// monitor is killed, so that no process is left unwatched.
	sysruntime.LockOSThread()
	cmd := &exec.Cmd{
		Path:   path,
		Args:   sp.Argv,
		Env:    withDefaultPath(sp.Env),
		Dir:    sp.WorkingDir,
		Stdin:  devNull,
		Stdout: outW,
		Stderr: errW,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	var initErr *os.File
	if sp.Rootfs != "" {
		// The container's init: this executable again, in new namespaces,
		// sets up the image's file system and execs the command.
		exe, err := os.Executable()
		if err != nil {
			return fail("%v", err)
		}
		r, w, err := os.Pipe()
		if err != nil {
			return fail("pipe: %v", err)
		}
		initErr = r
		cmd.Path, cmd.Args = exe, []string{exe, monitorArg, dir, initArg}
		cmd.ExtraFiles = []*os.File{w}
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC
		defer w.Close()
	}
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	if initErr != nil {
		// The init writes why it failed, or nothing: the pipe closes when
		// the command's exec succeeds.
		cmd.ExtraFiles[0].Close()
		msg, _ := io.ReadAll(initErr)
		initErr.Close()
		if len(msg) > 0 {
			_ = cmd.Wait()
			return fail("%s", strings.TrimSpace(string(msg)))
		}
	}
	started := time.Now()
	if ctrCgroup != "" {
		if err := leaveContainerCgroup(cg); err != nil {
			fmt.Fprintln(os.Stderr, "process monitor: leave the container's cgroup:", err)
		}
	}
	outW.Close()
	errW.Close()
	devNull.Close()
	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(stdout, outR) })
	copies.Go(func() { _, _ = io.Copy(stderr, errR) })

	pid := cmd.Process.Pid
	info := &procInfo{PID: pid, MonitorPID: os.Getpid(), StartedAt: started}
	info.PIDStart, _ = startTime(pid)
	info.MonitorStart, _ = startTime(os.Getpid())
	if err := writeJSON(filepath.Join(dir, procFile), info); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fail("write %s: %v", procFile, err)
	}
	report(syncw, startMessage{Proc: info})

	err = cmd.Wait()
	finished := time.Now()
	// What is left of the process group goes with its leader, as a
	// container's processes go with its init process.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	ex := exitInfo{FinishedAt: finished}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			ex.ExitCode = 128 + int32(ws.Signal())
		} else {
			ex.ExitCode = int32(ws.ExitStatus())
		}
	default:
		ex.ExitCode, ex.Reason, ex.Message = 255, backend.ReasonError, err.Error()
	}
	if ex.ExitCode == 137 && sp.CgroupParent != "" && (oomKilled(ctrCgroup, started) || oomKilled(sp.CgroupParent, started)) {
		ex.Reason = backend.ReasonOOMKilled
	}
	// Output still held by a process outside the group (one that made a
	// session of its own) is not waited for long.
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		outR.Close()
		errR.Close()
	}
	for _, c := range logs {
		_ = c.Close()
	}
	if err := writeJSON(filepath.Join(dir, exitFile), ex); err != nil {
		fmt.Fprintln(os.Stderr, "process monitor: write exit status:", err)
		return 1
	}
	return 0
}

// oomKilled reports whether the memory controller of the cgroup killed a
// process since the container started (cgroup v2 memory.events oom_kill;
// cgroup v1 memory.oom_control oom_kill), as far as it can tell.
func oomKilled(cgroupName string, _ time.Time) bool {
	for _, p := range []struct{ path, key string }{
		{filepath.Join("/sys/fs/cgroup", cgroupName, "memory.events"), "oom_kill"},
		{filepath.Join("/sys/fs/cgroup/memory", cgroupName, "memory.oom_control"), "oom_kill"},
	} {
		data, err := os.ReadFile(p.path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == p.key && f[1] != "0" {
				return true
			}
		}
	}
	return false
}

// defaultPath is the PATH of a container whose environment has none, as
// containerd's default.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func pathOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return defaultPath
}

func withDefaultPath(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "PATH="+defaultPath)
}

// lookPath finds the executable as the container's PATH says.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", fmt.Errorf("exec: %q: %w", name, err)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathOf(env)) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: permission denied", path)
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// writeJSON replaces the file atomically.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
