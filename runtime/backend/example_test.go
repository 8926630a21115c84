package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/backend"
)

// execBackend is a whole Backend in about 120 lines: each container is a
// host process started with os/exec, in a process group of its own. Its
// processes die with the agent (runtime/process keeps them running).
type execBackend struct {
	mu    sync.Mutex
	procs map[string]*proc
}

type proc struct {
	cmd  *exec.Cmd
	spec backend.Spec
	done chan struct{} // closed when the process has exited
	st   backend.Status
}

func (b *execBackend) get(id string) (*proc, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.procs[id]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
}

func (b *execBackend) Start(ctx context.Context, id string, spec backend.Spec) error {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env, cmd.Dir = spec.Env, spec.WorkingDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var closers []io.Closer
	if spec.LogPath != "" {
		f, err := backend.OpenLogFile(spec.LogPath)
		if err != nil {
			return err
		}
		stdout, stderr := backend.NewLogWriter(f, "stdout"), backend.NewLogWriter(f, "stderr")
		cmd.Stdout, cmd.Stderr = stdout, stderr
		closers = append(closers, stdout, stderr, f)
	}
	if err := cmd.Start(); err != nil {
		for _, c := range closers {
			c.Close()
		}
		return err
	}
	p := &proc{cmd: cmd, spec: spec, done: make(chan struct{}),
		st: backend.Status{Running: true, PID: cmd.Process.Pid, StartedAt: time.Now()}}
	b.mu.Lock()
	if b.procs == nil {
		b.procs = map[string]*proc{}
	}
	b.procs[id] = p
	b.mu.Unlock()
	go func() { // ends when the process does
		err := cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what is left of its group
		for _, c := range closers {
			c.Close()
		}
		b.mu.Lock()
		p.st.Running, p.st.PID, p.st.FinishedAt = false, 0, time.Now()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
				p.st.ExitCode = 128 + int32(ws.Signal())
			} else {
				p.st.ExitCode = int32(ws.ExitStatus())
			}
		}
		b.mu.Unlock()
		close(p.done)
	}()
	return nil
}

func (b *execBackend) Stop(ctx context.Context, id string, grace time.Duration) error {
	p, err := b.get(id)
	if err != nil {
		return err
	}
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *execBackend) Status(ctx context.Context, id string) (backend.Status, error) {
	p, err := b.get(id)
	if err != nil {
		return backend.Status{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return p.st, nil
}

func (b *execBackend) Wait(ctx context.Context, id string) (backend.Status, error) {
	p, err := b.get(id)
	if err != nil {
		return backend.Status{}, err
	}
	select {
	case <-p.done:
		return b.Status(ctx, id)
	case <-ctx.Done():
		return backend.Status{}, ctx.Err()
	}
}

func (b *execBackend) Exec(ctx context.Context, id string, argv []string, stdout, stderr io.Writer) (int, error) {
	p, err := b.get(id)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = p.spec.Env, p.spec.WorkingDir, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

func (b *execBackend) Remove(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.procs, id)
	return nil
}

// ExampleNewRuntime turns a Backend of a few dozen lines into a complete
// nodekit runtime: pass it as nodekit.Options.Runtime.
func ExampleNewRuntime() {
	rt := backend.NewRuntime(&execBackend{}, backend.Options{Name: "exec"})
	defer rt.Close()
	v, err := rt.Version(context.Background(), "v1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.RuntimeName)
	// Output: exec
}

var _ backend.Backend = (*execBackend)(nil)
