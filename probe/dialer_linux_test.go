//go:build linux

package probe

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDialer checks the options of probe connections: the kubelet's
// one-second linger and no TCP keep-alive.
func TestDialer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conn, err := dialer(time.Now().Add(time.Second)).DialContext(t.Context(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var (
		linger    *unix.Linger
		keepAlive int
		optErr    error
	)
	if err := raw.Control(func(fd uintptr) {
		linger, optErr = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER)
		if optErr == nil {
			keepAlive, optErr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if optErr != nil {
		t.Fatal(optErr)
	}
	if linger.Onoff == 0 || linger.Linger != 1 {
		t.Errorf("SO_LINGER = %+v, want on, 1s", *linger)
	}
	if keepAlive != 0 {
		t.Errorf("SO_KEEPALIVE = %d, want off", keepAlive)
	}
}
