//go:build linux

package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenNoSymlinks opens the absolute, clean path p without following any
// symlink in it, and returns an O_PATH descriptor of the file it names. It
// uses openat2(RESOLVE_NO_SYMLINKS) and, on kernels without openat2 (before
// 5.6), a walk of openat(O_PATH|O_NOFOLLOW) calls one component at a time
// (OpenBeneath from /). A symlink anywhere in p fails with ELOOP: p must be
// physical, as Resolve returns it. The descriptor names the file reached at
// the time of the call, whatever p names later; the caller closes it with
// CloseFD.
func OpenNoSymlinks(p string) (int, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || HasBackstep(p) {
		return -1, &fs.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	how := unix.OpenHow{
		// No O_NOFOLLOW: with it, a symlink as the last component would
		// be opened itself rather than refused.
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			// EAGAIN: a concurrent rename somewhere in the system made
			// the kernel's lookup retry; try again.
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			// No openat2, or a seccomp filter that refuses it: the walk
			// reports its own errors.
			return openWalk(p)
		}
		return -1, &fs.PathError{Op: "open", Path: p, Err: err}
	}
}

func openWalk(p string) (int, error) {
	var rel []string
	if p != "/" {
		rel = strings.Split(strings.TrimPrefix(p, "/"), "/")
	}
	return OpenBeneath("/", rel)
}

// FDPath returns the path the kernel records for the descriptor fd now
// (readlink of /proc/self/fd/<fd>): where the opened file is, even if it
// was moved since. It fails for a file that was deleted.
func FDPath(fd int) (string, error) {
	link := "/proc/self/fd/" + strconv.Itoa(fd)
	p, err := os.Readlink(link)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		return "", &fs.PathError{Op: "readlink", Path: link, Err: fs.ErrNotExist}
	}
	return p, nil
}

// TypeFD returns the type bits of the file open as fd (fs.ModeDir,
// fs.ModeSocket, ...; 0 for a regular file), as os.FileMode.Type does.
func TypeFD(fd int) (fs.FileMode, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, err
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return fs.ModeDir, nil
	case syscall.S_IFREG:
		return 0, nil
	case syscall.S_IFLNK:
		return fs.ModeSymlink, nil
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe, nil
	case syscall.S_IFSOCK:
		return fs.ModeSocket, nil
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice, nil
	case syscall.S_IFBLK:
		return fs.ModeDevice, nil
	}
	return fs.ModeIrregular, nil
}

// RBindFD bind-mounts the file open as fd, with the file systems mounted
// below it (MS_BIND|MS_REC, the runtime's "rbind"), on target, which must
// exist and be of the same kind. With readOnly the top mount is then made
// read-only.
func RBindFD(fd int, target string, readOnly bool) error {
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := syscall.Mount(src, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return &fs.PathError{Op: "bind mount", Path: target, Err: err}
	}
	if readOnly {
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			_ = UnmountAll(target)
			return &fs.PathError{Op: "remount read-only", Path: target, Err: err}
		}
	}
	return nil
}
