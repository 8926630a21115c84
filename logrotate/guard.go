package logrotate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// guardEvery is how often a guard reads the size of the rotated file the
// runtime writes to until it reopened the log: at the 200 MB/s of a
// writer at full speed, 0.4 MB a check.
const guardEvery = 2 * time.Millisecond

// guard holds the files the runtime writes to until it reopened a
// rotated log, the rotated file and, once the runtime made it, the new
// log, within limit bytes together: past it, the rotated file is cut back
// to the end of its last whole entry within keep bytes (what the log held
// when it was rotated), then the new log to its last whole entry within
// what the limit leaves, dropping what the runtime wrote past those
// points. The runtime appends (containerd and CRI-O open logs with
// O_APPEND), so its next entry follows the cut.
type guard struct {
	r                  *Rotator
	id, log, rotated   string
	keep, limit        int64
	rotatedF, newLogF  *os.File
	rotatedCut, newCut int64
}

// run guards the files until done is closed (the runtime reopened the
// log, or failed to) or ctx ends. Once done is closed it checks them a
// last time: what the runtime wrote to the rotated file since the last
// check (the guard may not have run for a while on a loaded machine)
// would otherwise stay, the runtime no longer writing to it.
//
// It never takes the Rotator's lock: a pass holding it (a rotation's
// file work or a runtime call, slow on a loaded machine) must not stop
// the cuts. It returns the bytes it cut, which the caller reports.
func (g *guard) run(ctx context.Context, done <-chan struct{}) (cut int64) {
	var err error
	if g.rotatedF, err = os.OpenFile(g.rotated, os.O_RDWR, 0); err != nil {
		return 0 // the rotation was undone already
	}
	defer g.rotatedF.Close()
	defer func() {
		if g.newLogF != nil {
			g.newLogF.Close()
		}
	}()
	g.rotatedCut, g.newCut = -1, -1
	t := g.r.opts.Clock.NewTicker(guardEvery)
	defer t.Stop()
	for first, last := true, false; !last; first = false {
		if !first {
			select {
			case <-done:
				last = true
			case <-ctx.Done():
				return cut
			case <-t.C():
			}
		}
		n, err := g.check()
		cut += n
		if err != nil {
			g.r.log.Error(err, "Cutting a container log the runtime writes to while it reopens it failed", "containerID", g.id, "path", g.log)
			return cut
		}
	}
	return cut
}

// check cuts the files when they pass the limit together, and returns
// the bytes cut.
func (g *guard) check() (int64, error) {
	rfi, err := g.rotatedF.Stat()
	if err != nil {
		return 0, nil
	}
	size := rfi.Size()
	if g.newLogF == nil {
		// Anything at the log's path is the new log: the rotated one was
		// renamed before the guard started.
		if f, err := os.OpenFile(g.log, os.O_RDWR, 0); err == nil {
			if fi, err := f.Stat(); err == nil && !os.SameFile(fi, rfi) {
				g.newLogF = f
			} else {
				f.Close()
			}
		}
	}
	var newSize int64
	if g.newLogF != nil {
		if fi, err := g.newLogF.Stat(); err == nil {
			newSize = fi.Size()
		}
	}
	if size+newSize <= g.limit {
		return 0, nil
	}
	var cut int64
	if g.rotatedCut < 0 {
		g.rotatedCut = lastEntryEnd(g.rotatedF, g.keep)
	}
	if size > g.rotatedCut {
		if err := g.rotatedF.Truncate(g.rotatedCut); err != nil {
			return cut, err
		}
		cut += size - g.rotatedCut
		size = g.rotatedCut
	}
	if g.newLogF == nil || size+newSize <= g.limit {
		return cut, nil
	}
	if g.newCut < 0 {
		g.newCut = lastEntryEnd(g.newLogF, max(g.limit-size, 0))
	}
	if newSize > g.newCut {
		if err := g.newLogF.Truncate(g.newCut); err != nil {
			return cut, err
		}
		cut += newSize - g.newCut
	}
	return cut, nil
}

// maxEntry is the longest entry lastEntryEnd looks back over (a CRI
// runtime's entries are at most 16 KiB of a line by default).
const maxEntry = 1 << 20

// lastEntryEnd returns the offset just past the last newline of f within
// its first n bytes, 0 when there is none in the last maxEntry bytes
// before n.
func lastEntryEnd(f *os.File, n int64) int64 {
	buf := make([]byte, 64<<10)
	for end := n; end > 0 && n-end < maxEntry; {
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return 0
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1
		}
		end = start
	}
	return 0
}
