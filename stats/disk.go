package stats

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// MaxDiskUsageEntries bounds the entries DiskUsage visits under one
// directory; beyond, it stops and returns ErrTooManyEntries with what it
// counted so far (a lower bound).
const MaxDiskUsageEntries = 1 << 20

// ErrTooManyEntries: a directory tree larger than MaxDiskUsageEntries was
// only partly measured.
var ErrTooManyEntries = errors.New("stats: too many entries to measure")

// DiskUsage is the space (allocated blocks, as du) and the inodes used
// under dir, not crossing into other file systems, hard links counted
// once. Entries that vanish meanwhile are skipped. It visits at most
// MaxDiskUsageEntries entries.
func DiskUsage(dir string) (bytes, inodes uint64, err error) {
	root, err := os.Lstat(dir)
	if err != nil {
		return 0, 0, err
	}
	rst, ok := root.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, errors.New("stats: no file system figures for " + dir)
	}
	dev := rst.Dev
	type ino struct{ dev, ino uint64 }
	var seen map[ino]bool
	visited := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // vanished meanwhile, or unreadable
		}
		if visited++; visited > MaxDiskUsageEntries {
			return ErrTooManyEntries
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if uint64(st.Dev) != uint64(dev) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && st.Nlink > 1 {
			k := ino{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			if seen == nil {
				seen = map[ino]bool{}
			}
			seen[k] = true
		}
		bytes += uint64(st.Blocks) * 512
		inodes++
		return nil
	})
	return bytes, inodes, err
}

// diskUsage is one cached measurement.
type diskUsage struct {
	at            time.Time
	bytes, inodes uint64
	err           error
}

// diskCache keeps DiskUsage results for a while, so that the summary and
// the eviction manager do not walk the same trees again and again.
type diskCache struct {
	mu      sync.Mutex
	entries map[string]diskUsage
}

// get returns dir's usage measured at most maxAge before now, measuring it
// again when older; entries not asked for in a sweep are dropped by
// prune.
func (c *diskCache) get(dir string, now time.Time, maxAge time.Duration) (bytes, inodes uint64, err error) {
	c.mu.Lock()
	e, ok := c.entries[dir]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < maxAge && !now.Before(e.at) {
		return e.bytes, e.inodes, e.err
	}
	b, n, err := DiskUsage(dir)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]diskUsage{}
	}
	c.entries[dir] = diskUsage{at: now, bytes: b, inodes: n, err: err}
	c.mu.Unlock()
	return b, n, err
}

// prune drops the entries older than maxAge (of pods gone).
func (c *diskCache) prune(now time.Time, maxAge time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if now.Sub(e.at) >= 2*maxAge {
			delete(c.entries, k)
		}
	}
}
