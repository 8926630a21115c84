package process

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// initErrFD is the init's pipe to its monitor: the init writes why it
// failed; the pipe closes, empty, when the command's exec succeeds.
const initErrFD = 3

// containerInit is the first process of a container in an image, started
// by its monitor in new mount, PID, UTS and IPC namespaces. It mounts the
// container's root (an overlay of the shared image with a writable layer
// in the container's directory), /proc and a small /dev, binds the
// container's mounts, sets the pod's host name, chroots into the root and
// execs the command, which thus becomes PID 1 of its namespace.
func containerInit(dir string) int {
	syscall.CloseOnExec(initErrFD)
	errw := os.NewFile(initErrFD, "init-error")
	fail := func(format string, args ...any) int {
		fmt.Fprintf(errw, format, args...)
		errw.Close()
		return 1
	}
	var sp spec
	if err := readJSON(filepath.Join(dir, specFile), &sp); err != nil {
		return fail("read spec: %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make the mount namespace private: %v", err)
	}
	root := filepath.Join(dir, "rootfs")
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{root, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fail("%v", err)
		}
	}
	opts := "lowerdir=" + sp.Rootfs + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		// No overlay here (a state directory on an overlay file system, a
		// kernel without it): the image, read-only, with no writable
		// layer.
		if err := unix.Mount(sp.Rootfs, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fail("mount the image's root: %v", err)
		}
		if err := unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fail("mount the image's root read-only: %v", err)
		}
	}
	proc := filepath.Join(root, "proc")
	_ = os.MkdirAll(proc, 0o555)
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_NODEV, ""); err != nil {
		return fail("mount /proc: %v", err)
	}
	dev := filepath.Join(root, "dev")
	_ = os.MkdirAll(dev, 0o755)
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_STRICTATIME, "mode=755,size=65536k"); err != nil {
		return fail("mount /dev: %v", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		p := filepath.Join(dev, d)
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o666); err == nil {
			f.Close()
		}
		if err := unix.Mount("/dev/"+d, p, "", unix.MS_BIND, ""); err != nil {
			return fail("bind /dev/%s: %v", d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		_ = os.Symlink(target, filepath.Join(dev, name))
	}
	_ = os.MkdirAll(filepath.Join(dev, "shm"), 0o1777)
	_ = unix.Mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=65536k")

	// The host paths of the mounts, opened before the chroot hides them;
	// their targets are made after it, so that the image's links resolve
	// inside the image.
	sources := make([]*os.File, len(sp.Mounts))
	for i, m := range sp.Mounts {
		f, err := os.OpenFile(m.Host, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail("mount %s: %v", m.Container, err)
		}
		sources[i] = f
	}
	if sp.Hostname != "" {
		if err := unix.Sethostname([]byte(sp.Hostname)); err != nil {
			return fail("set the host name: %v", err)
		}
	}
	if err := unix.Chroot(root); err != nil {
		return fail("chroot: %v", err)
	}
	if err := os.Chdir("/"); err != nil {
		return fail("%v", err)
	}
	for i, m := range sp.Mounts {
		fi, err := sources[i].Stat()
		if err != nil {
			return fail("mount %s: %v", m.Container, err)
		}
		if fi.IsDir() {
			err = os.MkdirAll(m.Container, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(m.Container), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(m.Container, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fail("mount %s: %v", m.Container, err)
		}
		src := fmt.Sprintf("/proc/self/fd/%d", sources[i].Fd())
		if err := unix.Mount(src, m.Container, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fail("mount %s at %s: %v", m.Host, m.Container, err)
		}
		if m.Readonly {
			if err := unix.Mount("", m.Container, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fail("mount %s read-only: %v", m.Container, err)
			}
		}
		sources[i].Close()
	}
	path, err := lookPath(sp.Argv[0], sp.Env)
	if err != nil {
		return fail("%v", err)
	}
	wd := sp.WorkingDir
	if wd == "" {
		wd = "/"
	}
	if err := os.Chdir(wd); err != nil {
		return fail("working directory: %v", err)
	}
	err = unix.Exec(path, sp.Argv, withDefaultPath(sp.Env))
	return fail("exec %s: %v", path, err)
}
