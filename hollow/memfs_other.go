//go:build !linux

package hollow

// memoryDir is "" (the system's temporary directory) off Linux.
func memoryDir() string { return "" }
