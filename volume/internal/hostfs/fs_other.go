//go:build !linux

package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// MkdirNoFollow creates the directories missing below dir. Outside Linux
// it is os.MkdirAll, without the symlink protection.
func MkdirNoFollow(dir string, missing []string, perm fs.FileMode) error {
	cur := dir
	for _, name := range missing {
		cur = filepath.Join(cur, name)
		if err := os.Mkdir(cur, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Chmod(cur, perm); err != nil {
			return err
		}
	}
	return nil
}

// CreateFileNoFollow creates the empty file path unless something exists
// there.
func CreateFileNoFollow(path string, perm fs.FileMode) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f.Close()
	return true, os.Chmod(path, perm)
}

// OpenBeneath is not supported outside Linux.
func OpenBeneath(base string, rel []string) (int, error) { return -1, ErrUnsupported }

// BindFD is not supported outside Linux.
func BindFD(fd int, target string) error { return ErrUnsupported }

// MountTmpfs is not supported outside Linux.
func MountTmpfs(dir string, size int64) error { return ErrUnsupported }

// Unmount is not supported outside Linux.
func Unmount(path string) error { return ErrUnsupported }

// Mounts is not supported outside Linux.
func Mounts() ([]MountInfo, error) { return nil, ErrUnsupported }

// CloseFD closes a descriptor OpenBeneath returned (never, outside Linux).
func CloseFD(fd int) error { return nil }

// SameFile is not supported outside Linux.
func SameFile(fd int, path string) (bool, error) { return false, ErrUnsupported }

// IsDirFD is not supported outside Linux.
func IsDirFD(fd int) (bool, error) { return false, ErrUnsupported }

// OpenNoSymlinks is not supported outside Linux.
func OpenNoSymlinks(p string) (int, error) { return -1, ErrUnsupported }

// FDPath is not supported outside Linux.
func FDPath(fd int) (string, error) { return "", ErrUnsupported }

// TypeFD is not supported outside Linux.
func TypeFD(fd int) (fs.FileMode, error) { return 0, ErrUnsupported }

// RBindFD is not supported outside Linux.
func RBindFD(fd int, target string, readOnly bool) error { return ErrUnsupported }
