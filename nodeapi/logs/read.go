package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

const (
	// forceCheckPeriod is how often a follow reads the file again without
	// a file event.
	forceCheckPeriod = time.Second
	// watchErrorRetries is how many fsnotify errors a follow tolerates.
	watchErrorRetries = 5
)

// ContainerStatuser is the part of the runtime a follow asks whether the
// container still runs.
type ContainerStatuser interface {
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// Read reads the CRI log file at path, the log of container containerID,
// and writes its records to stdout and stderr according to opts. Either
// writer may be nil: that stream is then skipped and not counted. It
// returns nil at the end of the file, at the byte limit, or (with Follow)
// once the container has stopped and the file holds nothing more. The
// logger comes from ctx (logr.FromContextOrDiscard).
func Read(ctx context.Context, path, containerID string, opts *Options, rs ContainerStatuser, stdout, stderr io.Writer) error {
	log := logr.FromContextOrDiscard(ctx)
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	// fsnotify follows symbolic links on some platforms only: resolve
	// them first. The path belongs to the runtime and the agent.
	evaluated, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("logs: failed to try resolving symlinks in path %q: %w", path, err)
	}
	path = evaluated
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("logs: failed to open log file %q: %w", path, err)
	}
	defer func() { f.Close() }()

	start, err := findTailLineStartIndex(f, opts.Tail)
	if err != nil {
		return fmt.Errorf("logs: failed to tail %d lines of log file %q: %w", opts.Tail, path, err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("logs: failed to seek %d in log file %q: %w", start, path, err)
	}

	limitedMode := opts.Tail >= 0 && !opts.Follow
	limitedNum := opts.Tail
	r := bufio.NewReaderSize(f, 64<<10)
	var (
		watcher   *fsnotify.Watcher
		stop      bool
		isNewLine = true
		found     = true
		w         = newWriter(stdout, stderr, opts)
		msg       Message
		long      []byte
		parse     func([]byte, *Message) error
		dir       = filepath.Dir(path)
	)
	defer func() {
		if watcher != nil {
			watcher.Close()
		}
	}()
	for {
		if stop || (limitedMode && limitedNum == 0) {
			return nil
		}
		// ReadSlice reuses the reader's buffer; only a line longer than
		// the buffer is gathered into long.
		l, err := r.ReadSlice(eol[0])
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], l...)
			for errors.Is(err, bufio.ErrBufferFull) {
				l, err = r.ReadSlice(eol[0])
				long = append(long, l...)
			}
			l = long
		}
		if err != nil {
			if err != io.EOF {
				return fmt.Errorf("logs: failed to read log file %q: %w", path, err)
			}
			if opts.Follow {
				// The container has stopped and everything is read.
				if !found {
					return nil
				}
				// Read an incomplete line again once it is complete.
				if _, err := f.Seek(-int64(len(l)), io.SeekCurrent); err != nil {
					return fmt.Errorf("logs: failed to reset seek in log file %q: %w", path, err)
				}
				r.Reset(f)
				if watcher == nil {
					if watcher, err = fsnotify.NewWatcher(); err != nil {
						return fmt.Errorf("logs: failed to create fsnotify watcher: %w", err)
					}
					if err := watcher.Add(dir); err != nil {
						return fmt.Errorf("logs: failed to watch directory %q: %w", dir, err)
					}
					// Read again: a write may have come before the watch.
					continue
				}
				// The old file is read to its end. The log was rotated
				// when its path names another file now: follow the new
				// one. Checking the path, not only waiting for a Create
				// event, also sees a rotation that came before the watch.
				if !rotated(f, path) {
					if found, err = waitLogs(ctx, log, clk, containerID, watcher, rs); err != nil {
						return err
					}
					continue
				}
				newF, err := os.Open(path)
				if err != nil {
					if os.IsNotExist(err) {
						continue
					}
					return fmt.Errorf("logs: failed to open log file %q: %w", path, err)
				}
				f.Close()
				f = newF
				r.Reset(f)
				continue
			}
			// Write what is left, then stop.
			stop = true
			if len(l) == 0 {
				continue
			}
			log.V(4).Info("Incomplete line in log file", "path", path)
		}
		if parse == nil {
			// The first line decides the format, as the kubelet's does.
			if parse, err = parseFunc(l); err != nil {
				return err
			}
		}
		if err := parse(l, &msg); err != nil {
			log.Error(err, "Failed when parsing line in log file", "path", path)
			continue
		}
		if err := w.write(&msg, isNewLine); err != nil {
			if errors.Is(err, errMaximumWrite) {
				return nil
			}
			return err
		}
		if limitedMode {
			limitedNum--
		}
		if len(msg.Log) > 0 {
			isNewLine = msg.Log[len(msg.Log)-1] == eol[0]
		} else {
			isNewLine = true
		}
	}
}

// rotated reports whether path now names a file other than the open f:
// the log was renamed away and created anew. A path that is gone (renamed,
// not yet created) is no rotation yet: its Create event wakes the follow.
func rotated(f *os.File, path string) bool {
	cur, err := os.Stat(path)
	if err != nil {
		return false
	}
	open, err := f.Stat()
	if err != nil {
		return false
	}
	return !os.SameFile(cur, open)
}

// waitLogs waits for the log file to change. It reports whether to read
// on (false: the container no longer runs).
func waitLogs(ctx context.Context, log logr.Logger, clk clock.Clock, id string, w *fsnotify.Watcher, rs ContainerStatuser) (bool, error) {
	if running, err := isContainerRunning(ctx, id, rs); !running {
		return false, err
	}
	t := clk.NewTimer(forceCheckPeriod)
	defer t.Stop()
	retries := watchErrorRetries
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("logs: context cancelled: %w", ctx.Err())
		case e := <-w.Events:
			// Any change in the directory may be the file's: read again.
			// A rotation shows at the end of the file read (rotated).
			switch e.Op {
			case fsnotify.Write, fsnotify.Rename, fsnotify.Remove, fsnotify.Chmod, fsnotify.Create:
				return true, nil
			default:
				log.Error(nil, "Received unexpected fsnotify event, retrying", "event", e.String())
			}
		case err := <-w.Errors:
			log.Error(err, "fsnotify watch error, retrying unless no more retries left", "retries", retries)
			if retries == 0 {
				return false, fmt.Errorf("logs: watching the log file: %w", err)
			}
			retries--
		case <-t.C():
			return true, nil
		}
	}
}

// isContainerRunning reports whether the container is running; a stopped
// container is no error.
func isContainerRunning(ctx context.Context, id string, rs ContainerStatuser) (bool, error) {
	resp, err := rs.ContainerStatus(ctx, id, false)
	if err != nil {
		// A runtime that is away (restarting) may come back: go on.
		if status.Code(err) == codes.Unavailable {
			return true, nil
		}
		return false, fmt.Errorf("logs: container %q status: %w", id, err)
	}
	if resp.GetStatus() == nil {
		return false, fmt.Errorf("logs: container %q has no status", id)
	}
	return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
}
