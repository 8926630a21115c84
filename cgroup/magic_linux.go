package cgroup

import "syscall"

// fsMagic returns the filesystem magic number of path (statfs f_type).
func fsMagic(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}
