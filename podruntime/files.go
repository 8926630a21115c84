package podruntime

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The files a container start writes under the pod's directory (its
// /etc/hosts, its termination-log file) and their directories, made with
// as few system calls as a new pod needs: each of them is new at the
// pod's first start.

// mkdirs makes dir and its missing parents, as os.MkdirAll, from the
// leaf up: one mkdir when only dir is missing, and no stat of the parents
// that exist. A dir that exists is left as it is (os.MkdirAll then says
// whether it is a directory).
func mkdirs(dir string, perm fs.FileMode) error {
	err := os.Mkdir(dir, perm)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		if parent == dir || parent == "." {
			return err
		}
		if err := mkdirs(parent, perm); err != nil {
			return err
		}
		if err = os.Mkdir(dir, perm); err == nil {
			return nil
		}
	}
	// It exists (or another error): os.MkdirAll says which.
	return os.MkdirAll(dir, perm)
}

// writeFile writes data to path, created or truncated, and gives it perm
// whatever the umask, as os.WriteFile followed by os.Chmod, on a bare
// file descriptor: no poller registration, no *os.File, and the mode set
// on the open file.
func writeFile(path string, data []byte, perm fs.FileMode) error {
	const flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC | syscall.O_CLOEXEC
	fd, err := retryEINTR(func() (int, error) { return syscall.Open(path, flags, uint32(perm.Perm())) })
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 && err == nil {
		var n int
		if n, err = retryEINTR(func() (int, error) { return syscall.Write(fd, data) }); err == nil {
			if n == 0 {
				err = syscall.EIO
			}
			data = data[n:]
		}
	}
	op := "write"
	if err == nil {
		op = "chmod"
		_, err = retryEINTR(func() (int, error) { return 0, syscall.Fchmod(fd, uint32(perm.Perm())) })
	}
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		op, err = "close", cerr
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: path, Err: err}
	}
	return nil
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != syscall.EINTR {
			return n, err
		}
	}
}
