// Package atomicfile replaces a file's content atomically and durably:
// the agent's state files (the allocation checkpoint, the image pull
// records, the user-namespace mappings) are either the old content or the
// new one after a crash, never a mix.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to path (mode 0600): a temporary file of path's
// directory, synced, renamed over path, then the directory synced. The
// directory is created with dirPerm when missing. On error path is left
// as it was and no temporary file remains.
func WriteFile(path string, data []byte, dirPerm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
