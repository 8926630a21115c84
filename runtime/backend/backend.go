package backend

import (
	"context"
	"errors"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Backend runs the process of each container. It is all a user writes to
// get a nodekit runtime: NewRuntime turns it into a RuntimeService and an
// ImageService, keeping sandboxes, IDs, labels, annotations, restart counts
// and the event stream itself.
//
// The adapter calls a Backend from many goroutines at once, but never twice
// at once for the same container, except Wait and Status (which may run
// while Stop or Exec does). Container IDs are 64 hexadecimal digits, unique
// and never reused. Errors for an ID the backend does not know must match
// runtime.ErrNotFound (wrap it with %w).
type Backend interface {
	// Start starts the container's process as spec says and returns once
	// it runs. A process that cannot be started (a command or working
	// directory that does not exist) is an error; its message becomes the
	// container's status message (reason "StartError", exit code 128, as
	// with containerd). Start is called at most once per ID.
	Start(ctx context.Context, id string, spec Spec) error
	// Stop stops the running process: it sends the graceful signal
	// (SIGTERM) to all of the container's processes, waits up to grace for
	// them to exit, then kills them (SIGKILL), and returns once the process
	// has exited (Status then reports it exited). A grace of 0 kills at
	// once. Stopping a process that has exited is not an error. It returns
	// ctx.Err() if ctx ends first.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Status reports the state of the process without blocking: running,
	// or exited with its exit code (128+N after signal N: 137 after
	// SIGKILL) and, optionally, a reason and message.
	Status(ctx context.Context, id string) (Status, error)
	// Wait blocks until the process has exited and returns its final
	// Status; it returns at once for a process that has exited. It returns
	// ctx.Err() if ctx ends first. The adapter calls it once per started
	// container to learn about exits (for the event stream).
	Wait(ctx context.Context, id string) (Status, error)
	// Exec runs cmd in the container's environment (its environment
	// variables and working directory, and whatever isolation the
	// backend gives the container), writes its output to stdout and
	// stderr, and returns its exit code. When ctx ends the command is
	// killed and Exec returns ctx.Err(). The container is running.
	Exec(ctx context.Context, id string, cmd []string, stdout, stderr io.Writer) (exitCode int, err error)
	// Remove releases what Start allocated. The process has exited (the
	// adapter stops it first). Removing an unknown ID is not an error.
	Remove(ctx context.Context, id string) error
}

// Spec is what a Backend needs to start one container.
type Spec struct {
	// Argv is the command to run: the container's command followed by its
	// args. It is not empty.
	Argv []string
	// Env holds KEY=VALUE pairs, in order.
	Env []string
	// WorkingDir is where the command runs; "" means the backend's
	// default.
	WorkingDir string
	// LogPath is the absolute path of the container's log file. The
	// backend appends the process's output to it in the CRI log format
	// ("<RFC 3339 nano time> stdout|stderr F|P <line>", see LogWriter). ""
	// means the output is discarded.
	LogPath string
	// Image is the container's image reference as the pod gives it, and
	// ImageID what ImageStatus reported for it.
	Image, ImageID string
	// Sandbox is the container's pod.
	Sandbox SandboxSpec
	// Config is the CRI container config, for what the fields above leave
	// out (mounts, resources, security context). Must not be modified.
	Config *runtimeapi.ContainerConfig
}

// SandboxSpec describes the pod a container runs in.
type SandboxSpec struct {
	// ID is the sandbox's ID.
	ID string
	// Name, Namespace and UID of the pod.
	Name, Namespace, UID string
	// CgroupParent is the pod's cgroup (cgroupfs form, such as
	// "/kubepods/burstable/pod<UID>"), or "" when the agent manages none.
	CgroupParent string
	// Hostname is the pod's host name.
	Hostname string
}

// Status is the state of a container's process.
type Status struct {
	// Running is true while the process runs.
	Running bool
	// PID of the process while it runs, 0 when unknown.
	PID int
	// StartedAt is when it started; FinishedAt when it exited.
	StartedAt, FinishedAt time.Time
	// ExitCode of an exited process: its exit status, or 128+N when
	// signal N ended it.
	ExitCode int32
	// Reason and Message of an exited process. An empty Reason becomes
	// "Completed" for exit code 0 and "Error" otherwise; "OOMKilled" says
	// the memory limit killed it.
	Reason, Message string
}

// The reasons the adapter reports for exited containers, as containerd does.
const (
	ReasonCompleted  = "Completed"
	ReasonError      = "Error"
	ReasonOOMKilled  = "OOMKilled"
	ReasonStartError = "StartError"
)

// ExitCodeStartError is the exit code of a container whose process could
// not be started, as containerd reports it.
const ExitCodeStartError = 128

// ErrNotRunning is the class of calls that need a running container
// (ExecSync, UpdateContainerResources) made on one that is not.
var ErrNotRunning = errors.New("backend: container is not running")
