//go:build unix && !linux

package file

// kernelFileSystem returns "": outside Linux no file system is refused.
func kernelFileSystem(fd int) string { return "" }
