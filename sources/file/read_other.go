//go:build !unix

package file

import (
	"fmt"
	"io"
	"os"
)

// readManifest opens name, checks that the opened file is a regular file,
// and reads at most MaxFileBytes+1 bytes.
func readManifest(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(name, fi.Mode())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file: %s: file larger than %d bytes", name, MaxFileBytes)
	}
	return data, nil
}
