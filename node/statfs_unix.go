//go:build unix

package node

import "golang.org/x/sys/unix"

// fsSize is the size in bytes of the file system holding path.
func fsSize(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}
