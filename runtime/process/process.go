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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/backend"
)

var _ backend.Backend = (*Backend)(nil)

// Options configure a process Backend. The zero value is usable.
type Options struct {
	// StateDir holds a directory per container (its spec, process and exit
	// status) and the adapter's records (New). A restarted agent given the
	// same StateDir finds its containers again. Defaults to
	// /run/nodekit/process as root, else $XDG_RUNTIME_DIR/nodekit/process,
	// else <os.TempDir()>/nodekit-<uid>/process: the state of processes
	// lives no longer than they do.
	StateDir string
	// MonitorCommand starts a container's monitor; the container's
	// directory is appended. Defaults to this program's executable with
	// the argument RunMonitor looks for, so the program must call
	// RunMonitor first thing in main.
	MonitorCommand []string
	// Cgroups puts each container in its pod's cgroup (the sandbox's
	// cgroup parent) through the cgroup package. Defaults to true as root
	// and false otherwise; when false the cgroup parent is ignored.
	Cgroups *bool
	// Images, when set (an imagestore.Store), makes each container run
	// in its image, unpacked in this store: chrooted into it, in namespaces of its own (mount,
	// PID, UTS with the pod's host name, IPC), with a writable overlay
	// layer of its own. It needs root (chroot and namespaces do). The
	// runtime's ImageService then pulls (imports from the store's
	// ImportDir), lists and removes the store's images. Defaults to nil:
	// commands run on the host, whatever their image.
	Images ImageStore
	// Logger receives a line when the Backend starts without root and
	// one for each failed clean-up. Defaults to discarding.
	Logger logr.Logger
}

// Backend runs each container as a host process under a monitor process
// of its own. Create it with NewBackend; it is safe for concurrent use and
// holds no goroutine.
type Backend struct {
	opts    Options
	log     logr.Logger
	cgroups bool
	dir     string // containers' directories
}

// defaultStateDir is where the state goes when Options say nothing.
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/run/nodekit/process"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "nodekit", "process")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("nodekit-%d", os.Geteuid()), "process")
}

// NewBackend returns a process Backend. It does no I/O but for finding
// its own executable; it logs once when it runs without root (no cgroups).
// It fails in a process started as a monitor: that means main did not call
// RunMonitor first.
func NewBackend(opts Options) (*Backend, error) {
	if os.Getenv(monitorEnv) != "" {
		return nil, errors.New("process: this process was started as a container monitor: call process.RunMonitor first thing in main")
	}
	if opts.StateDir == "" {
		opts.StateDir = defaultStateDir()
	}
	if !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("process: StateDir %q is not an absolute path", opts.StateDir)
	}
	if len(opts.MonitorCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("process: cannot find this program's executable for the monitor: %w", err)
		}
		opts.MonitorCommand = []string{exe, monitorArg}
	}
	b := &Backend{opts: opts, log: opts.Logger.WithName("process"), dir: filepath.Join(opts.StateDir, "containers")}
	root := os.Geteuid() == 0
	b.cgroups = root
	if opts.Cgroups != nil {
		b.cgroups = *opts.Cgroups
	}
	if opts.Images != nil && !root {
		return nil, errors.New("process: Options.Images needs root: a container runs chrooted into its image, in namespaces of its own; without root, leave Images nil to run host commands")
	}
	if !root {
		b.log.Info("not running as root: containers run as host processes of this user, without namespaces or cgroups")
	}
	return b, nil
}

// New returns the process runtime: the backend adapter over a process
// Backend, with its records in <StateDir>/records and the name "process".
// Close it when done (the processes keep running).
func New(opts Options) (*backend.Runtime, error) {
	b, err := NewBackend(opts)
	if err != nil {
		return nil, err
	}
	var be backend.Backend = b
	if opts.Images != nil {
		be = imageBackend{b}
	}
	return backend.NewRuntime(be, backend.Options{
		StateDir: filepath.Join(b.opts.StateDir, "records"),
		Name:     "process",
		Version:  "0.1.0",
		Logger:   opts.Logger,
	}), nil
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (b *Backend) containerDir(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("process: container %q: %w", id, runtime.ErrNotFound)
	}
	return filepath.Join(b.dir, id), nil
}

// Start implements backend.Backend: it writes the container's spec, starts
// its monitor and waits until the monitor says the process runs, or why it
// could not start (a command not found, a working directory missing).
func (b *Backend) Start(ctx context.Context, id string, s backend.Spec) error {
	dir, err := b.containerDir(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("process: %w", err)
	}
	sp := spec{Argv: s.Argv, Env: s.Env, WorkingDir: s.WorkingDir, LogPath: s.LogPath}
	if b.opts.Images != nil {
		if err := b.imageSpec(&sp, s); err != nil {
			return err
		}
	}
	if b.cgroups {
		sp.CgroupParent = s.Sandbox.CgroupParent
	}
	if err := writeJSON(filepath.Join(dir, specFile), sp); err != nil {
		return fmt.Errorf("process: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(b.opts.MonitorCommand[0], append(b.opts.MonitorCommand[1:], dir)...)
	cmd.Env = append(os.Environ(), monitorEnv+"=1")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("process: start monitor: %w", err)
	}
	w.Close()
	// The first monitor exits at once, leaving the detached one.
	waitErr := make(chan error, 1)
	go func() { waitErr <- waitChild(cmd) }()
	msgc := make(chan startMessage, 1)
	go func() {
		var m startMessage
		if err := json.NewDecoder(r).Decode(&m); err != nil {
			m.Error = "the monitor process ended without reporting a start"
			if data, _ := os.ReadFile(filepath.Join(dir, monitorLog)); len(data) > 0 {
				m.Error += ": " + strings.TrimSpace(string(data))
			}
		}
		msgc <- m
	}()
	var m startMessage
	select {
	case m = <-msgc:
	case <-ctx.Done():
		// The monitor goes on and starts the process all the same: wait
		// for its report (it comes, or the pipe closes as the monitor
		// ends), then kill what it started, so that a start given up
		// leaves no process behind.
		abandon := time.NewTimer(startAbandonTimeout)
		select {
		case m = <-msgc:
		case <-abandon.C:
			r.Close() // the decoder returns; the monitor's report fails
			m = <-msgc
		}
		abandon.Stop()
		<-waitErr
		b.abort(context.WithoutCancel(ctx), dir, m.Proc)
		return ctx.Err()
	}
	<-waitErr
	if m.Error != "" {
		return errors.New(m.Error)
	}
	return nil
}

// waitChild waits for cmd's process to exit on a pidfd registered with
// the Go runtime's poller, then reaps it with cmd.Wait, which no longer
// blocks. cmd.Wait alone blocks its goroutine in a waitid system call
// until the process exits, which holds a thread: the pod workers of a
// churn, each starting a container, made the Go runtime start threads
// that it keeps (and their memory) for as long as the agent runs. Where
// pidfds are missing it is cmd.Wait.
func waitChild(cmd *exec.Cmd) error {
	// The process is not reaped before cmd.Wait: its PID is its own.
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		return cmd.Wait()
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return cmd.Wait()
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Read(pidfdExited)
	}
	f.Close()
	return cmd.Wait()
}

// startAbandonTimeout bounds how long a cancelled Start waits for the
// monitor's report before it gives up on it: a monitor reports within
// milliseconds, or ends.
const startAbandonTimeout = 10 * time.Second

// abort kills the container a cancelled Start may have left running: the
// process group of p (the monitor's report; nil when there was none, and
// then what the monitor wrote, if anything), and its monitor, which it
// waits for, so that the container's exit status is written before the
// caller goes on.
func (b *Backend) abort(ctx context.Context, dir string, p *procInfo) {
	if p == nil {
		p, _ = procOf(dir)
	}
	if p == nil {
		return
	}
	if alive(p.MonitorPID, p.MonitorStart) {
		b.signal(p, syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(ctx, startAbandonTimeout)
		_ = waitExit(ctx, p.MonitorPID, p.MonitorStart)
		cancel()
	}
	b.kill(dir)
}

// procOf reads the process's identity; nil before it started.
func procOf(dir string) (*procInfo, error) {
	var p procInfo
	err := readJSON(filepath.Join(dir, procFile), &p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func exitOf(dir string) (*exitInfo, error) {
	var e exitInfo
	err := readJSON(filepath.Join(dir, exitFile), &e)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// alive reports whether the process pid with the given start time runs
// (a zombie has exited).
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, state, err := procStat(pid)
	return err == nil && st == start && state != 'Z' && state != 'X'
}

// Status implements backend.Backend from the container's directory: the
// exit status the monitor wrote, or running while the monitor lives. A
// monitor that died without writing an exit status took the process with
// it (it is the process's parent-death signal): exit code 137.
func (b *Backend) Status(ctx context.Context, id string) (backend.Status, error) {
	dir, err := b.containerDir(id)
	if err != nil {
		return backend.Status{}, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return backend.Status{}, fmt.Errorf("process: container %s: %w", id, runtime.ErrNotFound)
	}
	ex, err := exitOf(dir)
	if err != nil {
		return backend.Status{}, fmt.Errorf("process: container %s: %w", id, err)
	}
	p, err := procOf(dir)
	if err != nil {
		return backend.Status{}, fmt.Errorf("process: container %s: %w", id, err)
	}
	var st backend.Status
	if p != nil {
		st.StartedAt = p.StartedAt
	}
	switch {
	case ex != nil:
		st.ExitCode, st.Reason, st.Message, st.FinishedAt = ex.ExitCode, ex.Reason, ex.Message, ex.FinishedAt
	case p == nil:
		st.ExitCode, st.Reason, st.Message = backend.ExitCodeStartError, backend.ReasonStartError, "the process never started"
	case alive(p.MonitorPID, p.MonitorStart):
		st.Running, st.PID = true, p.PID
	default:
		// Read again: the monitor may have written it just before exiting.
		if ex, _ := exitOf(dir); ex != nil {
			st.ExitCode, st.Reason, st.Message, st.FinishedAt = ex.ExitCode, ex.Reason, ex.Message, ex.FinishedAt
			break
		}
		b.kill(dir)
		st.ExitCode, st.Reason = 137, backend.ReasonError
		st.Message = "the container's monitor process ended without recording an exit status"
		st.FinishedAt = time.Now()
	}
	return st, nil
}

// Wait implements backend.Backend: it waits for the monitor process to
// exit (through a pidfd, in the Go runtime's poller, so that a thousand
// waits cost no thread each) and returns the Status then.
func (b *Backend) Wait(ctx context.Context, id string) (backend.Status, error) {
	for {
		st, err := b.Status(ctx, id)
		if err != nil || !st.Running {
			return st, err
		}
		dir, _ := b.containerDir(id)
		p, err := procOf(dir)
		if err != nil || p == nil {
			continue
		}
		if err := waitExit(ctx, p.MonitorPID, p.MonitorStart); err != nil {
			return backend.Status{}, err
		}
	}
}

// Stop implements backend.Backend: SIGTERM to the process group, SIGKILL
// after the grace period.
func (b *Backend) Stop(ctx context.Context, id string, grace time.Duration) error {
	dir, err := b.containerDir(id)
	if err != nil {
		return err
	}
	st, err := b.Status(ctx, id)
	if err != nil || !st.Running {
		return err
	}
	p, err := procOf(dir)
	if err != nil || p == nil {
		return err
	}
	if grace > 0 {
		b.signal(p, syscall.SIGTERM)
		wctx, cancel := context.WithTimeout(ctx, grace)
		_, err := b.Wait(wctx, id)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	b.signal(p, syscall.SIGKILL)
	_, err = b.Wait(ctx, id)
	return err
}

// signal sends sig to the container's process group, as long as its
// monitor lives (so the group's ID is not someone else's).
func (b *Backend) signal(p *procInfo, sig syscall.Signal) {
	if !alive(p.MonitorPID, p.MonitorStart) {
		return
	}
	if err := syscall.Kill(-p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		b.log.Error(err, "cannot signal container process group", "pid", p.PID, "signal", sig.String())
	}
}

// kill kills the process group left by a container whose monitor is gone.
// The group is the container's while its leader is who it was (running or
// a zombie), or when no
// process has the leader's PID: the kernel does not give a PID away while
// a process group of that ID has members.
func (b *Backend) kill(dir string) {
	p, _ := procOf(dir)
	if p == nil {
		return
	}
	if start, _, err := procStat(p.PID); errors.Is(err, os.ErrNotExist) || (err == nil && start == p.PIDStart) {
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	}
}

// Exec implements backend.Backend: the command runs as a host process
// with the container's environment and working directory, in a process
// group killed when ctx ends.
func (b *Backend) Exec(ctx context.Context, id string, argv []string, stdout, stderr io.Writer) (int, error) {
	dir, err := b.containerDir(id)
	if err != nil {
		return 0, err
	}
	var sp spec
	if err := readJSON(filepath.Join(dir, specFile), &sp); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("process: container %s: %w", id, runtime.ErrNotFound)
		}
		return 0, fmt.Errorf("process: %w", err)
	}
	if sp.Rootfs != "" {
		p, err := procOf(dir)
		if err != nil || p == nil || !alive(p.MonitorPID, p.MonitorStart) {
			return 0, fmt.Errorf("process: container %s: %w", id, backend.ErrNotRunning)
		}
		return b.execInImage(ctx, sp, p.PID, argv, stdout, stderr)
	}
	path, err := lookPath(argv[0], sp.Env)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = argv
	cmd.Env = withDefaultPath(sp.Env)
	cmd.Dir = sp.WorkingDir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// Remove implements backend.Backend: whatever is left of the process
// group is killed and the container's directory removed.
func (b *Backend) Remove(ctx context.Context, id string) error {
	dir, err := b.containerDir(id)
	if err != nil {
		return nil
	}
	if p, _ := procOf(dir); p != nil {
		if alive(p.MonitorPID, p.MonitorStart) {
			b.signal(p, syscall.SIGKILL)
			if err := waitExit(ctx, p.MonitorPID, p.MonitorStart); err != nil {
				return err
			}
		}
		b.kill(dir)
	}
	if err := b.removeCgroup(ctx, dir, id); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("process: remove container %s: %w", id, err)
	}
	return nil
}

// procStat reads the start time (in clock ticks since boot) and state of a
// process from /proc/PID/stat.
func procStat(pid int) (start uint64, state byte, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return 0, 0, errors.New("malformed stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0][0], err
}

func startTime(pid int) (uint64, error) {
	s, _, err := procStat(pid)
	return s, err
}

// waitExit waits until the process pid (whose start time is start) has
// exited, or ctx ends. It waits on a pidfd registered with the Go
// runtime's poller; where pidfds are missing it polls every 100ms.
func waitExit(ctx context.Context, pid int, start uint64) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return pollExit(ctx, pid, start)
	}
	// Opened after the check of identity could have raced with a reuse of
	// the PID: check again now that the pidfd pins the process.
	if !alive(pid, start) {
		unix.Close(fd)
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return pollExit(ctx, pid, start)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return pollExit(ctx, pid, start)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(pidfdExited)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || alive(pid, start) {
		return pollExit(ctx, pid, start)
	}
	return nil
}

// pidfdExited reports whether the process of the pidfd exited (it is
// readable), for a RawConn's Read, which waits for the poller and asks
// again while it reports false. It asks the kernel rather than trusting
// the poller's first wake-up alone: an exit before the Read, whose edge
// the poller saw when the pidfd was registered, is dropped by the Read's
// reset of the descriptor, and waiting for another edge would wait
// forever.
func pidfdExited(fd uintptr) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		// An error other than EINTR: let the Read return, as if the
		// process exited; the callers check.
		return err != nil || n > 0
	}
}

func pollExit(ctx context.Context, pid int, start uint64) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for alive(pid, start) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
