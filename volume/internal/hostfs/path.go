package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUnsupported is returned by the mount operations on systems other than
// Linux.
var ErrUnsupported = errors.New("not supported on this system")

// maxSymlinks is the number of symlinks Resolve follows before giving up,
// as the kernel's ELOOP limit for a path walk (40) would be too strict for
// chains through several components; 255 is Go's filepath.EvalSymlinks
// limit.
const maxSymlinks = 255

// Within reports whether path is base or below it, comparing whole path
// components: /data holds /data and /data/x, not /database. Both must be
// absolute and clean.
func Within(path, base string) bool {
	if base == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == base || strings.HasPrefix(path, base+"/")
}

// HasBackstep reports whether the slash-separated path has a ".."
// component.
func HasBackstep(p string) bool {
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// Resolve returns the physical path of the absolute path p: every symlink
// along it followed, including dangling ones, so that the result names what
// an open or a bind mount of p would reach now. Components past the first
// one that does not exist are appended as they are. Unlike
// filepath.EvalSymlinks it succeeds when p does not exist, and it never
// leaves a symlink unresolved (EvalSymlinks stops at a dangling one, whose
// target a later mkdir would follow).
func Resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.EINVAL}
	}
	resolved := "/"
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	links := 0
	missing := false
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		if missing {
			resolved = next
			continue
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			resolved = next
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			resolved = next
			continue
		}
		links++
		if links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}

// ExistingPrefix splits the physical path p (as Resolve returns it) into
// its deepest existing directory and the components below it that do not
// exist yet.
func ExistingPrefix(p string) (string, []string, error) {
	var missing []string
	for cur := p; ; cur = filepath.Dir(cur) {
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			return cur, missing, nil
		case err == nil:
			return "", nil, &fs.PathError{Op: "mkdir", Path: cur, Err: syscall.ENOTDIR}
		case !errors.Is(err, fs.ErrNotExist):
			return "", nil, err
		case cur == "/":
			return "", nil, err
		}
		missing = append([]string{filepath.Base(cur)}, missing...)
	}
}

// ErrMounted is returned by RemoveAllUnmounted when something is mounted
// at or below the directory.
var ErrMounted = errors.New("a file system is mounted there")

// RemoveAllUnmounted removes dir and everything below it, unless a file
// system is mounted at or below it (per the mount table): removing through
// a mount would delete what it shows, which may be anything on the host.
// A dir that does not exist is not an error.
func RemoveAllUnmounted(dir string) error {
	return (*MountTable)(nil).RemoveAllUnmounted(dir, nil)
}

// IsMountPoint reports whether a file system is mounted on path, and which
// type the topmost one is. path is resolved first.
func IsMountPoint(path string) (bool, string, error) {
	phys, err := Resolve(path)
	if err != nil {
		return false, "", err
	}
	mounts, err := Mounts()
	if err != nil {
		return false, "", err
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].MountPoint == phys {
			return true, mounts[i].FSType, nil
		}
	}
	return false, "", nil
}

// UnmountAll unmounts every file system mounted at or below dir, deepest
// first.
func UnmountAll(dir string) error {
	return (*MountTable)(nil).UnmountAll(dir)
}
