package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	sysruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/runtime/backend"
)

// Image is an unpacked image of an ImageStore.
type Image struct {
	// ID is the image's ID ("sha256:<config digest>").
	ID string
	// RepoTags are the references it was pulled as.
	RepoTags []string
	// Size of its files, in bytes.
	Size uint64
	// Env and WorkingDir are the image's configuration: its environment
	// (under the container's) and default working directory.
	Env        []string
	WorkingDir string
	// Entrypoint and Cmd are the image's command: a container that gives
	// none runs them.
	Entrypoint, Cmd []string
	// Rootfs is the unpacked file system, shared read-only by the
	// image's containers.
	Rootfs string
}

// ImageStore keeps the images containers run in (Options.Images);
// imagestore.Store is one. It is an interface so that a program that does
// not use images does not link the OCI code. It must be safe for
// concurrent use; errors for an image it does not have match
// runtime.ErrNotFound.
type ImageStore interface {
	// Pull makes the image ref names present (imports it) and returns it.
	Pull(ctx context.Context, ref string) (Image, error)
	// Get returns a present image, by reference or ID.
	Get(ref string) (Image, error)
	// List returns the present images.
	List() ([]Image, error)
	// Remove forgets a reference, or an image by ID.
	Remove(ref string) error
}

// imageBackend is the Backend of a runtime with an image store: the
// backend adapter's ImageService serves the store's images.
type imageBackend struct{ *Backend }

var (
	_ backend.ImageStore     = imageBackend{}
	_ backend.ImageCommander = imageBackend{}
)

// ResolveImage implements backend.ImageResolver: the ID of a pulled image
// (by reference or ID), or an error matching runtime.ErrNotFound.
func (b imageBackend) ResolveImage(ctx context.Context, ref string) (string, error) {
	img, err := b.opts.Images.Get(ref)
	if err != nil {
		return "", err
	}
	return img.ID, nil
}

// ImageCommand implements backend.ImageCommander: the image's entrypoint
// and Cmd.
func (b imageBackend) ImageCommand(ctx context.Context, id string) (entrypoint, cmd []string, err error) {
	img, err := b.opts.Images.Get(id)
	if err != nil {
		return nil, nil, err
	}
	return img.Entrypoint, img.Cmd, nil
}

// PullImage implements backend.ImageStore: it imports the image from the
// store's ImportDir.
func (b imageBackend) PullImage(ctx context.Context, ref string) (string, error) {
	img, err := b.opts.Images.Pull(ctx, ref)
	if err != nil {
		return "", err
	}
	return img.ID, nil
}

// ListImages implements backend.ImageStore.
func (b imageBackend) ListImages(ctx context.Context) ([]backend.Image, error) {
	imgs, err := b.opts.Images.List()
	if err != nil {
		return nil, err
	}
	out := make([]backend.Image, len(imgs))
	for i, img := range imgs {
		out[i] = backend.Image{ID: img.ID, RepoTags: img.RepoTags, Size: img.Size}
	}
	return out, nil
}

// RemoveImage implements backend.ImageStore.
func (b imageBackend) RemoveImage(ctx context.Context, ref string) error {
	return b.opts.Images.Remove(ref)
}

// imageSpec completes the spec of a container in an image: its root,
// the pod's host name, the image's environment under the container's and
// its working directory unless the container sets one, and the mounts.
func (b *Backend) imageSpec(sp *spec, s backend.Spec) error {
	img, err := b.opts.Images.Get(s.Image)
	if err != nil {
		return fmt.Errorf("process: image %q of the container: %w", s.Image, err)
	}
	sp.Rootfs, sp.Hostname = img.Rootfs, s.Sandbox.Hostname
	sp.Env = mergeEnv(img.Env, s.Env)
	if sp.WorkingDir == "" {
		sp.WorkingDir = img.WorkingDir
	}
	for _, m := range s.Config.GetMounts() {
		if m.GetHostPath() == "" || m.GetContainerPath() == "" {
			continue
		}
		sp.Mounts = append(sp.Mounts, bindMount{Host: m.GetHostPath(), Container: m.GetContainerPath(), Readonly: m.GetReadonly()})
	}
	return nil
}

// mergeEnv returns the image's environment with the container's over it,
// as containerd: a container's variable replaces the image's of the same
// name.
func mergeEnv(image, container []string) []string {
	out := make([]string, 0, len(image)+len(container))
	index := map[string]int{}
	for _, kv := range append(append([]string(nil), image...), container...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// execInImage runs argv in the running container's namespaces (UTS, IPC,
// PID, joined by the thread that starts it) and root (/proc/PID/root,
// which is the container's mount namespace's root), with its environment
// and working directory.
func (b *Backend) execInImage(ctx context.Context, sp spec, pid int, argv []string, stdout, stderr io.Writer) (int, error) {
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	path, err := lookPathIn(root, argv[0], sp.Env)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(path)
	cmd.Args = argv
	cmd.Env = withDefaultPath(sp.Env)
	cmd.Dir = sp.WorkingDir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Chroot: root}
	started := make(chan error, 1)
	go func() {
		// The thread joins the namespaces and is never given back to the
		// Go runtime: it ends with this goroutine.
		sysruntime.LockOSThread()
		for _, ns := range []string{"uts", "ipc", "pid"} {
			if err := setns(pid, ns); err != nil {
				started <- err
				return
			}
		}
		started <- cmd.Start()
	}()
	if err := <-started; err != nil {
		return 0, fmt.Errorf("process: exec in container: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = cmd.Wait()
	stop()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
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

func setns(pid int, ns string) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), 0); err != nil {
		return fmt.Errorf("join the container's %s namespace: %w", ns, err)
	}
	return nil
}

// lookPathIn finds the executable as the container's PATH says, inside
// root: links resolve inside it (openat2 RESOLVE_IN_ROOT).
func lookPathIn(root, name string, env []string) (string, error) {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("process: container root: %w", err)
	}
	defer unix.Close(rootfd)
	isExec := func(p string) bool {
		fd, err := unix.Openat2(rootfd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
		if err != nil {
			return false
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
	}
	if strings.Contains(name, "/") {
		if !isExec(name) {
			return "", fmt.Errorf("exec: %q: no such executable in the container", name)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathOf(env)) {
		p := filepath.Join("/", dir, name)
		if isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}
