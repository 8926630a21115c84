package cgroup

import (
	"errors"
	"io/fs"
	"os"
)

// fsys is what the managers do to the cgroup filesystem. realFS does it to
// cgroupfs; emulatedFS does it to a plain directory, playing the kernel's
// part.
type fsys interface {
	// mkdir makes one directory; fs.ErrExist when it exists.
	mkdir(path string) error
	// rmdir removes one empty cgroup directory.
	rmdir(path string) error
	readFile(path string) ([]byte, error)
	// writeFile writes value to an existing file in one write.
	writeFile(path, value string) error
	readDir(path string) ([]fs.DirEntry, error)
	// kill sends SIGKILL to pid; a process already gone is not an error.
	kill(pid int) error
}

type realFS struct{}

func (realFS) mkdir(path string) error { return os.Mkdir(path, 0o755) }

func (realFS) rmdir(path string) error { return os.Remove(path) }

func (realFS) readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (realFS) writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (realFS) readDir(path string) ([]fs.DirEntry, error) { return os.ReadDir(path) }

func (realFS) kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	defer p.Release()
	if err := p.Signal(os.Kill); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
