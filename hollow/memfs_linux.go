//go:build linux

package hollow

import "golang.org/x/sys/unix"

// memoryDir is where Start makes the nodes' directory when Options.Dir is
// empty: /dev/shm when it is a tmpfs this process may write, "" (the
// system's temporary directory) otherwise.
func memoryDir() string {
	const shm = "/dev/shm"
	var st unix.Statfs_t
	if err := unix.Statfs(shm, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return ""
	}
	if unix.Access(shm, unix.W_OK) != nil {
		return ""
	}
	return shm
}
