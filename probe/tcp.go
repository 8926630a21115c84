package probe

import (
	"context"
	"net"
	"strconv"
	"time"
)

// tcp opens a TCP connection to the probe's host (the pod IP when empty)
// and port within the timeout, and closes it: a connection is a success,
// anything else a failure.
func (p *DefaultProber) tcp(ctx context.Context, req *Request) (Result, string, error) {
	s := req.Probe.TCPSocket
	port, err := resolvePort(s.Port, req.Container)
	if err != nil {
		return Unknown, "", err
	}
	host := s.Host
	if host == "" {
		if host, err = podHost(req); err != nil {
			return Unknown, "", err
		}
	}
	d := dialer(time.Now().Add(req.Timeout()))
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		if ctx.Err() != nil {
			return Unknown, "", ctx.Err()
		}
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}
