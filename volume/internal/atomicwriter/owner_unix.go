//go:build unix

package atomicwriter

import (
	"io/fs"
	"syscall"
)

// oNoFollow refuses to open a symlink.
const oNoFollow = syscall.O_NOFOLLOW

// owner returns the uid and gid of a file.
func owner(fi fs.FileInfo) (uid, gid int64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int64(st.Uid), int64(st.Gid), true
}
