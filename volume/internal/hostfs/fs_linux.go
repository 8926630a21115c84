//go:build linux

package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// oPath is O_PATH, the same value on every Linux architecture; package
// syscall does not define it for amd64.
const oPath = 0x200000

const dirFlags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC

// MkdirNoFollow creates the directories missing below the existing
// directory dir, one by one with mkdirat and openat(O_NOFOLLOW), so that
// nobody can turn a created directory into a symlink on the way. Each one
// it creates gets mode perm (not masked by the umask), with its setuid,
// setgid and sticky bits, as the kubelet's doSafeMakeDir. A component that
// appears meanwhile as a directory is used as it is; as anything else, it is
// an error.
func MkdirNoFollow(dir string, missing []string, perm fs.FileMode) error {
	fd, err := syscall.Open(dir, dirFlags, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	cur := dir
	for _, name := range missing {
		cur = filepath.Join(cur, name)
		created := true
		if err := syscall.Mkdirat(fd, name, kernelMode(perm)); err != nil {
			if !errors.Is(err, syscall.EEXIST) {
				syscall.Close(fd)
				return &fs.PathError{Op: "mkdir", Path: cur, Err: err}
			}
			created = false
		}
		child, err := syscall.Openat(fd, name, dirFlags, 0)
		syscall.Close(fd)
		if err != nil {
			return &fs.PathError{Op: "open", Path: cur, Err: err}
		}
		fd = child
		if created {
			if err := syscall.Fchmod(fd, kernelMode(perm)); err != nil {
				syscall.Close(fd)
				return &fs.PathError{Op: "chmod", Path: cur, Err: err}
			}
		}
	}
	return syscall.Close(fd)
}

// kernelMode is perm as chmod(2) takes it: the permission bits and the
// setuid, setgid and sticky bits.
func kernelMode(perm fs.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&fs.ModeSetuid != 0 {
		m |= syscall.S_ISUID
	}
	if perm&fs.ModeSetgid != 0 {
		m |= syscall.S_ISGID
	}
	if perm&fs.ModeSticky != 0 {
		m |= syscall.S_ISVTX
	}
	return m
}

// CreateFileNoFollow creates the empty file path with mode perm (not masked
// by the umask) unless something exists there, without following a symlink
// in its last component. Its parent must exist. It reports whether it
// created the file.
func CreateFileNoFollow(path string, perm fs.FileMode) (bool, error) {
	dir, name := filepath.Split(path)
	dfd, err := syscall.Open(dir, dirFlags, 0)
	if err != nil {
		return false, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(dfd)
	fd, err := syscall.Openat(dfd, name, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, uint32(perm.Perm()))
	if errors.Is(err, syscall.EEXIST) {
		return false, nil
	}
	if err != nil {
		return false, &fs.PathError{Op: "create", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	if err := syscall.Fchmod(fd, uint32(perm.Perm())); err != nil {
		return true, &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	return true, nil
}

// OpenBeneath opens base/rel[0]/rel[1]/... one component at a time with
// openat(O_PATH|O_NOFOLLOW), so that no symlink is followed below base, and
// returns an O_PATH descriptor of the last one (base itself when rel is
// empty). base must be physical (as Resolve returns it). The caller closes
// the descriptor.
func OpenBeneath(base string, rel []string) (int, error) {
	fd, err := syscall.Open(base, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|oPath, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: base, Err: err}
	}
	cur := base
	for _, name := range rel {
		cur = filepath.Join(cur, name)
		if name == "" || name == "." || name == ".." {
			syscall.Close(fd)
			return -1, &fs.PathError{Op: "open", Path: cur, Err: syscall.EINVAL}
		}
		child, err := syscall.Openat(fd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		syscall.Close(fd)
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: cur, Err: err}
		}
		fd = child
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			return -1, &fs.PathError{Op: "stat", Path: cur, Err: err}
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			syscall.Close(fd)
			return -1, &fs.PathError{Op: "open", Path: cur, Err: syscall.ELOOP}
		}
	}
	return fd, nil
}

// BindFD bind-mounts the file open as fd (an O_PATH descriptor from
// OpenBeneath) on target, which must exist and be of the same kind
// (directory on directory, anything else on a file). Mounting
// /proc/self/fd/<fd> binds exactly the opened file, whatever its path has
// become since.
func BindFD(fd int, target string) error {
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return &fs.PathError{Op: "bind mount", Path: target, Err: err}
	}
	return nil
}

// MountTmpfs mounts a tmpfs on dir, of size bytes (0: the kernel's
// default, half the RAM).
func MountTmpfs(dir string, size int64) error {
	data := ""
	if size > 0 {
		data = "size=" + strconv.FormatInt(size, 10)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, data); err != nil {
		return &fs.PathError{Op: "mount tmpfs", Path: dir, Err: err}
	}
	return nil
}

// Unmount unmounts the file system mounted on path.
func Unmount(path string) error {
	if err := syscall.Unmount(path, 0); err != nil {
		return &fs.PathError{Op: "unmount", Path: path, Err: err}
	}
	return nil
}

// Mounts reads the mount table of the process's mount namespace.
func Mounts() ([]MountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := ParseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("/proc/self/mountinfo: %w", err)
	}
	return m, nil
}

// CloseFD closes a descriptor OpenBeneath returned.
func CloseFD(fd int) error { return syscall.Close(fd) }

// SameFile reports whether the descriptor fd and path (not followed if a
// symlink) are the same file.
func SameFile(fd int, path string) (bool, error) {
	var a, b syscall.Stat_t
	if err := syscall.Fstat(fd, &a); err != nil {
		return false, err
	}
	if err := syscall.Lstat(path, &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// IsDirFD reports whether the descriptor fd is a directory.
func IsDirFD(fd int) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFDIR, nil
}
