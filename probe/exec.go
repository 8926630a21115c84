package probe

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// exec runs the probe's command in the container through the runtime's
// ExecSync. Exit code 0 is a success, any other a failure; a command that
// does not finish within the timeout is a failure (the kubelet's
// ExecProbeTimeout behaviour). Other errors mean the probe could not run.
func (p *DefaultProber) exec(ctx context.Context, req *Request) (Result, string, error) {
	if p.opts.Runtime == nil {
		return Unknown, "", errors.New("probe: exec probe without a runtime (ProberOptions.Runtime)")
	}
	if req.ContainerID == "" {
		return Unknown, "", fmt.Errorf("probe: exec probe of container %q without a container ID", containerName(req))
	}
	cmd := req.Probe.Exec.Command
	if req.Container != nil && len(req.Container.Env) > 0 {
		expanded, err := expandStatic(cmd, req.Container.Env)
		if err != nil {
			// The command can never run: a failure, with the reason as
			// its output, as a command missing from the image.
			return Failure, err.Error(), nil
		}
		cmd = expanded
	}
	timeout := req.Timeout()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, stderr, err := p.opts.Runtime.ExecSync(tctx, req.ContainerID, cmd, timeout)
	out := combinedOutput(stdout, stderr)
	if err == nil {
		return Success, out, nil
	}
	if code, ok := exitCode(err); ok {
		if code == 0 {
			return Success, out, nil
		}
		return Failure, out, nil
	}
	if ctx.Err() == nil && isTimeout(tctx, err) {
		return Failure, fmt.Sprintf("command %q timed out after %s", cmd, timeout), nil
	}
	return Unknown, "", fmt.Errorf("probe: exec in container %q: %w", containerName(req), err)
}

// combinedOutput joins stdout and stderr, capped at maxOutput bytes.
func combinedOutput(stdout, stderr []byte) string {
	n := min(len(stdout)+len(stderr), maxOutput)
	if n == 0 {
		return ""
	}
	b := make([]byte, 0, n)
	b = append(b, stdout[:min(len(stdout), n)]...)
	b = append(b, stderr[:min(len(stderr), n-len(b))]...)
	return string(b)
}

// exitCode finds the exit code in an ExecSync error: the CRI client and
// runtimetest return a k8s.io/utils/exec.CodeExitError (ExitStatus() int),
// os/exec returns an *exec.ExitError (ExitCode() int).
func exitCode(err error) (int, bool) {
	var es interface{ ExitStatus() int }
	if errors.As(err, &es) {
		return es.ExitStatus(), true
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode(), true
	}
	return 0, false
}

// isTimeout reports whether an ExecSync error is the command's timeout:
// the probe's deadline passed, the runtime answered DeadlineExceeded (the
// CRI's report of an exec timeout), or the error says it is a timeout.
func isTimeout(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.DeadlineExceeded {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
