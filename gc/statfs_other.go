//go:build !unix

package gc

import "errors"

// Statfs is not available on this platform.
func Statfs(path string) (FsStats, error) {
	return FsStats{}, errors.New("gc: statfs is not available on this platform")
}
