//go:build unix

package file

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// readManifest opens name without blocking (O_NONBLOCK: a FIFO without a
// writer would block the open itself), checks that the opened file, not
// the path, is a regular file, and reads at most MaxFileBytes+1 bytes. It
// uses the descriptor directly rather than an os.File, whose reads of a
// pollable file (/proc/kmsg) wait for data in the runtime's poller: here
// a read that would block fails at once. Files of the kernel's own file
// systems (proc, sysfs, ...) are refused unread: reading some of them
// blocks or consumes what they hold.
func readManifest(name string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if uint32(st.Mode)&syscall.S_IFMT != syscall.S_IFREG {
		return nil, notRegular(name, modeOf(uint32(st.Mode)))
	}
	if fsName := kernelFileSystem(fd); fsName != "" {
		return nil, fmt.Errorf("file: %s is a file of the kernel's %s file system, not a manifest: skipped", name, fsName)
	}
	size := int64(512)
	if st.Size > 0 {
		size = min(st.Size+1, MaxFileBytes+1)
	}
	data := make([]byte, 0, size)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		room := min(cap(data), MaxFileBytes+1) - len(data)
		if room <= 0 {
			break
		}
		n, err := syscall.Read(fd, data[len(data):len(data)+room])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return nil, fmt.Errorf("file: %s: reading it would block: %w", name, err)
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			break
		}
		data = data[:len(data)+n]
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file: %s: file larger than %d bytes", name, MaxFileBytes)
	}
	return data, nil
}

// modeOf returns the type bits of a stat mode as an fs.FileMode.
func modeOf(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	case syscall.S_IFDIR:
		return fs.ModeDir
	}
	return fs.ModeIrregular
}
