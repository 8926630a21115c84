package probe_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tcpRequest(host, podIP string, port intstr.IntOrString, containerPort int) probe.Request {
	return probe.Request{
		Type:      probe.Liveness,
		Pod:       &v1.Pod{},
		PodStatus: &v1.PodStatus{PodIP: podIP},
		Container: &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "svc", ContainerPort: int32(containerPort)}}},
		Probe:     &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: host, Port: port}}, TimeoutSeconds: 1},
	}
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	open := l.Addr().(*net.TCPAddr).Port
	closed := freePort(t)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	tests := []struct {
		name string
		req  probe.Request
		want probe.Result
		err  bool
	}{
		{"pod IP and port", tcpRequest("", "127.0.0.1", intstr.FromInt32(int32(open)), 0), probe.Success, false},
		{"named port", tcpRequest("", "127.0.0.1", intstr.FromString("svc"), open), probe.Success, false},
		{"explicit host", tcpRequest("127.0.0.1", "", intstr.FromInt32(int32(open)), 0), probe.Success, false},
		{"connection refused", tcpRequest("", "127.0.0.1", intstr.FromInt32(int32(closed)), 0), probe.Failure, false},
		{"unknown port name", tcpRequest("", "127.0.0.1", intstr.FromString("nope"), open), probe.Unknown, true},
		{"no host", tcpRequest("", "", intstr.FromInt32(int32(open)), 0), probe.Unknown, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, out, err := p.Probe(t.Context(), tc.req)
			if r != tc.want || (err != nil) != tc.err {
				t.Errorf("probe = %v, %q, %v; want %v (error %v)", r, out, err, tc.want, tc.err)
			}
		})
	}
}

// healthServer serves grpc.health.v1 with the statuses of the standard
// health server, a Check that hangs for the service "slow", and records
// the user agents it sees.
type healthServer struct {
	*health.Server
	mu     sync.Mutex
	agents []string
}

func (s *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		s.mu.Lock()
		s.agents = append(s.agents, md.Get("user-agent")...)
		s.mu.Unlock()
	}
	if req.Service == "slow" {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	return s.Server.Check(ctx, req)
}

func startGRPC(t *testing.T, withHealth bool) (*healthServer, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := &healthServer{Server: health.NewServer()}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	if withHealth {
		healthpb.RegisterHealthServer(srv, hs)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return hs, l.Addr().(*net.TCPAddr).Port
}

func grpcRequest(podIP string, port int, service *string) probe.Request {
	return probe.Request{
		Type:      probe.Readiness,
		Pod:       &v1.Pod{},
		PodStatus: &v1.PodStatus{PodIP: podIP},
		Container: &v1.Container{Name: "app"},
		Probe:     &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port), Service: service}}, TimeoutSeconds: 1},
	}
}

func TestGRPC(t *testing.T) {
	hs, port := startGRPC(t, true)
	_, bare := startGRPC(t, false)
	closed := freePort(t)
	p := probe.NewDefaultProber(probe.ProberOptions{})
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		req    probe.Request
		want   probe.Result
		output string
		err    bool
	}{
		{"serving", grpcRequest("127.0.0.1", port, nil), probe.Success, "service healthy", false},
		{"serving, empty service", grpcRequest("127.0.0.1", port, str("")), probe.Success, "service healthy", false},
		{"not serving", grpcRequest("127.0.0.1", port, str("down")), probe.Failure, `service unhealthy (responded with "NOT_SERVING")`, false},
		{"unknown service", grpcRequest("127.0.0.1", port, str("nope")), probe.Failure, "error: health rpc probe failed", false},
		{"timeout", grpcRequest("127.0.0.1", port, str("slow")), probe.Failure, "timeout: health rpc did not complete within 1s", false},
		{"no health service", grpcRequest("127.0.0.1", bare, nil), probe.Failure, "does not implement the grpc health protocol", false},
		{"connection refused", grpcRequest("127.0.0.1", closed, nil), probe.Failure, "error: health rpc probe failed", false},
		{"no pod IP", grpcRequest("", port, nil), probe.Unknown, "", true},
		{"bad port", grpcRequest("127.0.0.1", 0, nil), probe.Unknown, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, out, err := p.Probe(t.Context(), tc.req)
			if r != tc.want || (err != nil) != tc.err || !strings.Contains(out, tc.output) {
				t.Errorf("probe = %v, %q, %v; want %v with %q (error %v)", r, out, err, tc.want, tc.output, tc.err)
			}
		})
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.agents) == 0 || !strings.HasPrefix(hs.agents[0], "kube-probe/1.37") {
		t.Errorf("user agents = %q, want kube-probe/1.37", hs.agents)
	}
}

// runningContainer starts a container that runs until stopped.
func runningContainer(t *testing.T, rt *runtimetest.Runtime) string {
	t.Helper()
	ctx := t.Context()
	sc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid"}}
	sid, err := rt.RunPodSandbox(ctx, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sid, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  []string{"sleep", "infinity"},
	}, sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

func execRequest(id string, env []v1.EnvVar, cmd ...string) probe.Request {
	return probe.Request{
		Type:        probe.Liveness,
		Pod:         &v1.Pod{},
		PodStatus:   &v1.PodStatus{},
		Container:   &v1.Container{Name: "app", Env: env},
		ContainerID: id,
		Probe:       &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}, TimeoutSeconds: 2},
	}
}

func TestExecRuntimetest(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	id := runningContainer(t, rt)
	var (
		mu   sync.Mutex
		cmds [][]string
	)
	rt.SetExecHandler(func(containerID string, cmd []string) ([]byte, []byte, int32) {
		mu.Lock()
		cmds = append(cmds, cmd)
		mu.Unlock()
		if containerID != id {
			return nil, []byte("wrong container"), 99
		}
		switch cmd[0] {
		case "ok":
			return []byte("out "), []byte("err"), 0
		case "fail":
			return []byte("bad"), []byte(" worse"), 3
		case "big":
			return []byte(strings.Repeat("o", 8<<10)), []byte(strings.Repeat("e", 8<<10)), 0
		}
		return nil, nil, 0
	})
	p := probe.NewDefaultProber(probe.ProberOptions{Runtime: rt})
	tests := []struct {
		name string
		req  probe.Request
		want outcome
	}{
		{"exit 0 succeeds with stdout and stderr", execRequest(id, nil, "ok"), outcome{probe.Success, "out err", false}},
		{"non-zero exit fails", execRequest(id, nil, "fail"), outcome{probe.Failure, "bad worse", false}},
		{"output capped at 10 KiB", execRequest(id, nil, "big"), outcome{probe.Success, strings.Repeat("o", 8<<10) + strings.Repeat("e", 2<<10), false}},
		{"unknown container", execRequest("nope", nil, "ok"), outcome{probe.Unknown, "", true}},
		{"no container ID", execRequest("", nil, "ok"), outcome{probe.Unknown, "", true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(t, p, tc.req)); diff != "" {
				t.Errorf("probe (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("command expanded with the container's plain env", func(t *testing.T) {
		mu.Lock()
		cmds = nil
		mu.Unlock()
		env := []v1.EnvVar{{Name: "FILE", Value: "/tmp/healthy"}, {Name: "SECRET", ValueFrom: &v1.EnvVarSource{}}}
		run(t, p, execRequest(id, env, "cat", "$(FILE)", "$(SECRET)x", "$(UNSET)", "$$(FILE)"))
		mu.Lock()
		defer mu.Unlock()
		want := [][]string{{"cat", "/tmp/healthy", "x", "$(UNSET)", "$(FILE)"}}
		if diff := cmp.Diff(want, cmds); diff != "" {
			t.Errorf("commands (-want +got):\n%s", diff)
		}
	})

	t.Run("command past its bound fails, unrun", func(t *testing.T) {
		mu.Lock()
		cmds = nil
		mu.Unlock()
		env := []v1.EnvVar{{Name: "K", Value: strings.Repeat("k", 1024)}}
		tests := []struct {
			cmd  []string
			want string
		}{
			{[]string{"sh", "-c", strings.Repeat("$(K)", 4096)}, "exec probe command[2]: too long: more than 1048576 bytes after $(VAR) expansion"},
			{slices.Repeat([]string{strings.Repeat("$(K)", 1000)}, 10), "exec probe command[8]: too long: the probe's command would exceed 8388608 bytes"},
		}
		for _, tc := range tests {
			got := run(t, p, execRequest(id, env, tc.cmd...))
			if diff := cmp.Diff(outcome{probe.Failure, tc.want, false}, got); diff != "" {
				t.Errorf("probe (-want +got):\n%s", diff)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(cmds) != 0 {
			t.Errorf("%d commands ran, want none", len(cmds))
		}
	})

	t.Run("exited container", func(t *testing.T) {
		if err := rt.StopContainer(t.Context(), id, 0); err != nil {
			t.Fatal(err)
		}
		got := run(t, p, execRequest(id, nil, "ok"))
		if diff := cmp.Diff(outcome{probe.Unknown, "", true}, got); diff != "" {
			t.Errorf("probe (-want +got):\n%s", diff)
		}
	})
}

type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return "exit status" }
func (e exitCodeError) ExitCode() int { return e.code }

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

func TestExecErrors(t *testing.T) {
	tests := []struct {
		name string
		exec probe.ExecerFunc
		want outcome
	}{
		{"ExitCode() non-zero", func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
			return []byte("x"), nil, exitCodeError{2}
		}, outcome{probe.Failure, "x", false}},
		{"ExitCode() zero", func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
			return nil, nil, exitCodeError{0}
		}, outcome{probe.Success, "", false}},
		{"wrapped exit code", func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
			return nil, nil, errorsJoin(exitCodeError{1})
		}, outcome{probe.Failure, "", false}},
		{"runtime's DeadlineExceeded", func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
			return nil, nil, status.Error(codes.DeadlineExceeded, "timeout 2s exceeded")
		}, outcome{probe.Failure, `command ["check"] timed out after 2s`, false}},
		{"a Timeout() error", func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
			return nil, nil, timeoutError{}
		}, outcome{probe.Failure, `command ["check"] timed out after 2s`, false}},
		{"other runtime error", func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
			return nil, nil, status.Error(codes.Unavailable, "runtime down")
		}, outcome{probe.Unknown, "", true}},
		{"the timeout is passed", func(_ context.Context, _ string, _ []string, timeout time.Duration) ([]byte, []byte, error) {
			if timeout != 2*time.Second {
				return nil, nil, exitCodeError{1}
			}
			return nil, nil, nil
		}, outcome{probe.Success, "", false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := probe.NewDefaultProber(probe.ProberOptions{Runtime: tc.exec})
			if diff := cmp.Diff(tc.want, run(t, p, execRequest("c1", nil, "check"))); diff != "" {
				t.Errorf("probe (-want +got):\n%s", diff)
			}
		})
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("exec failed"), err) }

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	// The exec is fake: the timeout runs on synctest's clock, exactly.
	synctest.Test(t, func(t *testing.T) {
		// An Execer that honours its context but whose command never ends.
		hang := probe.ExecerFunc(func(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, []byte, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
		p := probe.NewDefaultProber(probe.ProberOptions{Runtime: hang})
		req := execRequest("c1", nil, "sleep", "10")
		req.Probe.TimeoutSeconds = 1
		start := time.Now()
		got := run(t, p, req)
		if d := time.Since(start); d != time.Second {
			t.Errorf("probe took %v, want its 1s timeout", d)
		}
		if diff := cmp.Diff(outcome{probe.Failure, `command ["sleep" "10"] timed out after 1s`, false}, got); diff != "" {
			t.Errorf("probe (-want +got):\n%s", diff)
		}

		// A probe cancelled by its caller is not a failure.
		ctx, cancel := contextWithCancel(t)
		cancel()
		if r, _, err := p.Probe(ctx, req); err == nil || r == probe.Failure {
			t.Errorf("cancelled probe = %v, %v; want an error", r, err)
		}
	})
}

func TestNoRuntimeOrHandler(t *testing.T) {
	p := probe.NewDefaultProber(probe.ProberOptions{})
	if r, _, err := p.Probe(t.Context(), execRequest("c1", nil, "true")); err == nil || r != probe.Unknown {
		t.Errorf("exec without runtime = %v, %v; want an error", r, err)
	}
	req := execRequest("c1", nil)
	req.Probe.Exec = nil
	if r, _, err := p.Probe(t.Context(), req); err == nil || r != probe.Unknown {
		t.Errorf("probe without handler = %v, %v; want an error", r, err)
	}
	req.Probe = nil
	if r, _, err := p.Probe(t.Context(), req); err == nil || r != probe.Unknown {
		t.Errorf("request without probe = %v, %v; want an error", r, err)
	}
}
