package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpc calls grpc.health.v1.Health/Check with the probe's service name on
// the pod IP and the probe's port, in plaintext, within the timeout:
// SERVING is a success; another status, an error or a timeout a failure.
func (p *DefaultProber) grpc(ctx context.Context, req *Request) (Result, string, error) {
	g := req.Probe.GRPC
	host, err := podHost(req)
	if err != nil {
		return Unknown, "", err
	}
	if g.Port <= 0 || g.Port >= 65536 {
		return Unknown, "", fmt.Errorf("probe: invalid port number %d", g.Port)
	}
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(g.Port)))
	timeout := req.Timeout()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(p.opts.UserAgent),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer(time.Now().Add(timeout)).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, err), nil
	}
	defer conn.Close()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(tctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if ctx.Err() != nil {
			return Unknown, "", ctx.Err()
		}
		switch status.Code(err) {
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message()), nil
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}
