//go:build linux

package logrotate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchMask is what arms a log's watch: any write, truncation, change of
// attributes, rename or removal of the file, reported once (IN_ONESHOT:
// a log written without pause gives one event per pass, not one per
// write).
const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF | unix.IN_ONESHOT

// dirWatchMask arms the watch of a directory: a file created or moved in,
// the directory renamed or removed.
const dirWatchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF | unix.IN_ONLYDIR | unix.IN_ONESHOT

// inotify tells which logs were written since their watch was armed. It
// never blocks: a pass reads the events the kernel queued since the last.
//
// Its file, on Go's poller, lets wait block until events are queued
// without a thread of its own.
type inotify struct {
	fd  int
	f   *os.File
	buf []byte
}

func newWatcher() (watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	return &inotify{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), buf: make([]byte, 64<<10)}, nil
}

// wait blocks until events are queued, or ctx ends. The events stay
// queued for read.
func (w *inotify) wait(ctx context.Context) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { w.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		// The poller is armed before this is called: an event queued
		// after the check wakes it.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (w *inotify) add(path string, dir bool) (int32, error) {
	mask := uint32(watchMask)
	if dir {
		mask = dirWatchMask
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, mask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return 0, errWatchesExhausted
		}
		return 0, &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	return int32(wd), nil
}

func (w *inotify) remove(wd int32) {
	// A watch that fired is gone already: EINVAL is expected.
	unix.InotifyRmWatch(w.fd, uint32(wd))
}

// read calls fn with the watch of each event queued, and reports whether
// the kernel dropped events (its queue overflowed).
func (w *inotify) read(fn func(wd int32)) (overflow bool, err error) {
	for {
		n, err := unix.Read(w.fd, w.buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return overflow, nil
		case err != nil:
			return overflow, fmt.Errorf("reading inotify events: %w", err)
		case n < unix.SizeofInotifyEvent:
			return overflow, fmt.Errorf("reading inotify events: short read of %d bytes", n)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			if mask&unix.IN_Q_OVERFLOW != 0 {
				overflow = true
				continue
			}
			fn(wd)
		}
	}
}

func (w *inotify) close() error { return w.f.Close() }

// device is the device of a file, which tells its file system.
func device(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}

// notifyingFS reports whether the file system of path tells inotify of
// every write to its files: the local ones. A network or FUSE file system
// does not see the writes of other hosts or of its server, so its logs
// are checked every pass.
func notifyingFS(path string) bool {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return false
	}
	switch uint32(s.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.RAMFS_MAGIC, zfsSuperMagic:
		return true
	}
	return false
}

// zfsSuperMagic is ZFS on Linux's (not in x/sys/unix).
const zfsSuperMagic = 0x2fc12fc2
