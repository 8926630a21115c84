//go:build unix

package gc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Statfs reads the size and the space available to unprivileged users of
// the file system holding path.
func Statfs(path string) (FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsStats{}, fmt.Errorf("gc: statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return FsStats{Capacity: st.Blocks * bs, Available: st.Bavail * bs, Inodes: st.Files, InodesFree: st.Ffree}, nil
}
