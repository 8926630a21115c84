//go:build !unix

package node

import "errors"

func fsSize(string) (int64, error) {
	return 0, errors.New("node: file system sizes are not supported on this system")
}
