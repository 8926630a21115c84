//go:build unix

package probe

import "syscall"

// lingerControl sets SO_LINGER to one second on probe connections, as the
// kubelet's probe dialer does, so that closed probe connections do not pile
// up in TIME-WAIT (kubernetes/kubernetes#89898).
func lingerControl(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	})
}
