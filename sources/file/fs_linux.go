//go:build linux

package file

import "syscall"

// The file systems of the kernel's own files (statfs(2) magic numbers),
// which never hold a manifest: some of their files block, and some are
// consumed by reading them (/proc/kmsg).
var kernelFS = map[int64]string{
	0x9fa0:     "proc",
	0x62656572: "sysfs",
	0x64626720: "debugfs",
	0x74726163: "tracefs",
	0x73636673: "securityfs",
	0x62656570: "configfs",
}

// kernelFileSystem returns the name of the kernel file system the open
// file fd is on, or "".
func kernelFileSystem(fd int) string {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &st); err != nil {
		return ""
	}
	return kernelFS[int64(st.Type)]
}
