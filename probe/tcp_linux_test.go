package probe_test

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/probe"
)

// fullListener returns the port of a listening socket whose accept queue is
// full: the kernel drops new connection attempts, so a dial hangs until
// its timeout.
func fullListener(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Skipf("bind: %v", err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Skipf("listen: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	// Fill the queue (backlog 0 holds one connection).
	for range 4 {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err != nil {
			return port // the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("could not fill the accept queue of a listening socket")
	return 0
}

func TestTCPTimeout(t *testing.T) {
	t.Parallel()
	port := fullListener(t)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	start := time.Now()
	r, out, err := p.Probe(t.Context(), tcpRequest("", "127.0.0.1", intstr.FromInt32(int32(port)), 0))
	// Nothing accepts: only the timeout ends the probe. The bound leaves a
	// loaded machine room.
	if d := time.Since(start); d < 900*time.Millisecond || d > 10*time.Second {
		t.Errorf("probe took %v, want its 1s timeout", d)
	}
	if r != probe.Failure || err != nil {
		t.Errorf("probe = %v, %q, %v; want a timeout failure", r, out, err)
	}
}
