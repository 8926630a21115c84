//go:build !unix

package probe

import "syscall"

// lingerControl leaves the socket as it is (the kubelet's probe dialer
// sets no option on Windows either).
func lingerControl(_, _ string, _ syscall.RawConn) error { return nil }
