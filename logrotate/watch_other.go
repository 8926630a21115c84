//go:build !linux

package logrotate

import (
	"errors"
	"os"
)

func newWatcher() (watcher, error) {
	return nil, errors.New("watching files is implemented on Linux only")
}

func device(os.FileInfo) (uint64, bool) { return 0, false }

func notifyingFS(string) bool { return false }
