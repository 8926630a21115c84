package cri_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// socketPath returns a unix socket path in a fresh directory short enough
// for the 108-byte limit of socket paths.
func socketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

// serve serves rt on a unix socket until the test ends and returns the
// endpoint.
func serve(t testing.TB, rt *runtimetest.Runtime) string {
	t.Helper()
	path := socketPath(t)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := runtimetest.NewServer(rt)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "unix://" + path
}

// newClient returns a client of a fresh runtime served on a unix socket.
func newClient(t testing.TB, rtOpts runtimetest.Options, opts ...cri.Opt) (*cri.Client, *runtimetest.Runtime) {
	t.Helper()
	rt := runtimetest.New(rtOpts)
	t.Cleanup(rt.Close)
	endpoint := serve(t, rt)
	c, err := cri.New(t.Context(), endpoint, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, rt
}

func sandboxConfig(name, uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Labels: map[string]string{
			runtime.LabelPodName:      name,
			runtime.LabelPodNamespace: "default",
			runtime.LabelPodUID:       uid,
		},
	}
}

func containerConfig(name, uid string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  []string{"sleep", "infinity"},
		Labels: map[string]string{
			runtime.LabelContainerName: name,
			runtime.LabelPodUID:        uid,
		},
	}
}

func diffProto(want, got any) string { return cmp.Diff(want, got, protocmp.Transform()) }

// TestRoundTrip calls every method through the client and compares each
// answer with the in-memory runtime's own.
func TestRoundTrip(t *testing.T) {
	c, rt := newClient(t, runtimetest.Options{Images: []string{"busybox"}})
	ctx := t.Context()

	if v := c.RuntimeVersion(); v.GetRuntimeName() != "runtimetest" || v.GetRuntimeApiVersion() != "v1" {
		t.Errorf("RuntimeVersion after New = %v, want runtimetest v1", v)
	}
	v, err := c.Version(ctx, "v1")
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	wantV, _ := rt.Version(ctx, "v1")
	if d := diffProto(wantV, v); d != "" {
		t.Errorf("Version (-want +got):\n%s", d)
	}
	rt.SetCondition(runtimeapi.NetworkReady, false, "NoCNI", "no network")
	st, err := c.Status(ctx, true)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	wantSt, _ := rt.Status(ctx, true)
	if d := diffProto(wantSt, st); d != "" {
		t.Errorf("Status (-want +got):\n%s", d)
	}

	// Images.
	ref, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, nil, nil)
	if err != nil || ref == "" {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}
	imgs, err := c.ListImages(ctx, nil)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	wantImgs, _ := rt.ListImages(ctx, nil)
	if d := diffProto(wantImgs, imgs); d != "" || len(imgs) != 2 {
		t.Errorf("ListImages (-want +got), want 2 images:\n%s", d)
	}
	is, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, false)
	if err != nil || is.GetImage().GetId() != ref {
		t.Errorf("ImageStatus(nginx) = %v, %v; want image %s", is, err, ref)
	}
	if err := c.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}); err != nil {
		t.Errorf("RemoveImage: %v", err)
	}
	is, err = c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, false)
	if err != nil || is.GetImage() != nil {
		t.Errorf("ImageStatus(removed) = %v, %v; want no image, no error", is, err)
	}

	// Sandbox and container lifecycle.
	sc := sandboxConfig("web", "uid-1")
	sid, err := c.RunPodSandbox(ctx, sc, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	ps, err := c.PodSandboxStatus(ctx, sid, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	wantPs, _ := rt.PodSandboxStatus(ctx, sid, false)
	if d := diffProto(wantPs, ps); d != "" {
		t.Errorf("PodSandboxStatus (-want +got):\n%s", d)
	}
	filter := &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runtime.LabelPodUID: "uid-1"}}
	sbs, err := c.ListPodSandbox(ctx, filter)
	if err != nil || len(sbs) != 1 || sbs[0].Id != sid {
		t.Errorf("ListPodSandbox = %v, %v; want [%s]", sbs, err, sid)
	}

	cid, err := c.CreateContainer(ctx, sid, containerConfig("app", "uid-1"), sc)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, cid); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	ctrs, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: cid})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	wantCtrs, _ := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: cid})
	if d := diffProto(wantCtrs, ctrs); d != "" || len(ctrs) != 1 {
		t.Errorf("ListContainers (-want +got), want 1:\n%s", d)
	}
	cs, err := c.ContainerStatus(ctx, cid, false)
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	if cs.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("ContainerStatus state = %v, want running", cs.Status.State)
	}
	res := &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512, MemoryLimitInBytes: 1 << 28}}
	if err := c.UpdateContainerResources(ctx, cid, res); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	cs, _ = c.ContainerStatus(ctx, cid, false)
	if d := diffProto(res.Linux, cs.Status.GetResources().GetLinux()); d != "" {
		t.Errorf("resources after UpdateContainerResources (-want +got):\n%s", d)
	}

	// ExecSync: output, and a non-zero exit as a CodeExitError.
	rt.SetExecHandler(func(id string, cmd []string) ([]byte, []byte, int32) {
		if cmd[0] == "fail" {
			return []byte("out"), []byte("bad"), 3
		}
		return []byte(strings.Join(cmd, " ")), nil, 0
	})
	stdout, stderr, err := c.ExecSync(ctx, cid, []string{"echo", "hi"}, time.Second)
	if err != nil || string(stdout) != "echo hi" || len(stderr) != 0 {
		t.Errorf("ExecSync(echo hi) = %q, %q, %v; want \"echo hi\", \"\", nil", stdout, stderr, err)
	}
	stdout, stderr, err = c.ExecSync(ctx, cid, []string{"fail"}, 0)
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 || string(stdout) != "out" || string(stderr) != "bad" {
		t.Errorf("ExecSync(fail) = %q, %q, %v; want out, bad, exit status 3", stdout, stderr, err)
	}

	if err := c.StopContainer(ctx, cid, 5); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if got, _ := rt.LastStopTimeout(cid); got != 5 {
		t.Errorf("stop timeout seen by the runtime = %d, want 5", got)
	}
	cs, _ = c.ContainerStatus(ctx, cid, false)
	if cs.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || cs.Status.ExitCode != 137 {
		t.Errorf("after StopContainer: state %v exit %d, want exited 137", cs.Status.State, cs.Status.ExitCode)
	}
	if err := c.RemoveContainer(ctx, cid); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if err := c.StopPodSandbox(ctx, sid); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if err := c.RemovePodSandbox(ctx, sid); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if n := len(rt.Sandboxes()) + len(rt.Containers()); n != 0 {
		t.Errorf("%d objects left in the runtime, want 0", n)
	}
	_, err = c.ContainerStatus(ctx, cid, false)
	if !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("ContainerStatus(removed) = %v, want runtime.ErrNotFound", err)
	}

	// Every method reached the runtime exactly as often as called.
	for method, want := range map[string]int{
		"RunPodSandbox": 1, "StopPodSandbox": 1, "RemovePodSandbox": 1,
		"CreateContainer": 1, "StartContainer": 1, "StopContainer": 1, "RemoveContainer": 1,
		"UpdateContainerResources": 1, "ExecSync": 2, "PullImage": 1, "RemoveImage": 1,
	} {
		if got := rt.Calls(method); got != want {
			t.Errorf("runtime saw %d %s calls, want %d", got, method, want)
		}
	}
}

// TestErrorClasses checks that each gRPC code the runtime answers reaches
// the caller as the runtime error class, with the original status kept.
func TestErrorClasses(t *testing.T) {
	c, rt := newClient(t, runtimetest.Options{})
	tests := []struct {
		code      codes.Code
		class     error // nil: no class
		isNF, isU bool
	}{
		{code: codes.NotFound, class: runtime.ErrNotFound, isNF: true},
		{code: codes.Unimplemented, class: runtime.ErrUnimplemented},
		{code: codes.Unavailable, class: runtime.ErrUnavailable, isU: true},
		{code: codes.DeadlineExceeded, class: runtime.ErrDeadlineExceeded},
		{code: codes.Canceled, class: context.Canceled},
		{code: codes.Internal},
	}
	classes := []error{runtime.ErrNotFound, runtime.ErrUnimplemented, runtime.ErrUnavailable, runtime.ErrDeadlineExceeded, context.Canceled}
	for _, tc := range tests {
		t.Run(tc.code.String(), func(t *testing.T) {
			rt.InjectErrorOnce("StartContainer", status.Error(tc.code, "boom"))
			err := c.StartContainer(t.Context(), "c1")
			if err == nil {
				t.Fatal("StartContainer succeeded, want an error")
			}
			for _, cl := range classes {
				if got, want := errors.Is(err, cl), cl == tc.class; got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, cl, got, want)
				}
			}
			if got := status.Code(err); got != tc.code {
				t.Errorf("status.Code = %v, want %v", got, tc.code)
			}
			if s, _ := status.FromError(err); s.Message() != "boom" {
				t.Errorf("status message = %q, want boom", s.Message())
			}
			if got := runtime.IsNotFound(err); got != tc.isNF {
				t.Errorf("runtime.IsNotFound = %v, want %v", got, tc.isNF)
			}
			if got := runtime.IsUnavailable(err); got != tc.isU {
				t.Errorf("runtime.IsUnavailable = %v, want %v", got, tc.isU)
			}
			for _, part := range []string{"cri: StartContainer c1: ", "boom"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
			var e *cri.Error
			if !errors.As(err, &e) || e.Method != "StartContainer" || e.ID != "c1" {
				t.Errorf("errors.As *cri.Error = %+v, want method StartContainer, ID c1", e)
			}
		})
	}
}

// TestTimeout: a runtime slower than the per-call timeout gives
// ErrDeadlineExceeded; a context with an earlier deadline wins over the
// per-call timeout.
func TestTimeout(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	endpoint := serve(t, rt)
	c, err := cri.New(t.Context(), endpoint, cri.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	slow := runtimetest.New(runtimetest.Options{Latency: 10 * time.Second})
	t.Cleanup(slow.Close)
	slowEndpoint := serve(t, slow)
	// The version check would wait the latency too: use a conn directly.
	conn, err := grpc.NewClient(slowEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc, err := cri.NewFromConn(conn, cri.WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err = sc.ListContainers(t.Context(), nil)
	if !errors.Is(err, runtime.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) || !runtime.IsDeadlineExceeded(err) {
		t.Errorf("ListContainers on a slow runtime = %v, want ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ListContainers took %v, want about the 50ms timeout", d)
	}

	// A context deadline earlier than the per-call timeout (1 min) wins.
	c2, _ := cri.NewFromConn(conn, cri.WithTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := c2.ListPodSandbox(ctx, nil); !errors.Is(err, runtime.ErrDeadlineExceeded) {
		t.Errorf("ListPodSandbox with a short context = %v, want ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ListPodSandbox took %v, want about the 50ms context deadline", d)
	}

	// PullImage has no per-call timeout: a 50ms timeout does not cut a
	// pull slower than that.
	pullRT := runtimetest.New(runtimetest.Options{Latency: 200 * time.Millisecond})
	t.Cleanup(pullRT.Close)
	pconn, err := grpc.NewClient(serve(t, pullRT), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer pconn.Close()
	pc, _ := cri.NewFromConn(pconn, cri.WithTimeout(50*time.Millisecond))
	if _, err := pc.PullImage(t.Context(), &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil); err != nil {
		t.Errorf("PullImage slower than the per-call timeout = %v, want success", err)
	}
	if _, err := pc.ImageStatus(t.Context(), &runtimeapi.ImageSpec{Image: "busybox"}, false); !errors.Is(err, runtime.ErrDeadlineExceeded) {
		t.Errorf("ImageStatus slower than the per-call timeout = %v, want ErrDeadlineExceeded", err)
	}
	// ExecSync gets its own timeout on top of the per-call one.
	pullRT.ImageAdd("busybox")
	sid, _ := pullRT.RunPodSandbox(t.Context(), sandboxConfig("p", "u"), "")
	cid, _ := pullRT.CreateContainer(t.Context(), sid, containerConfig("c", "u"), sandboxConfig("p", "u"))
	_ = pullRT.StartContainer(t.Context(), cid)
	if _, _, err := pc.ExecSync(t.Context(), cid, []string{"true"}, time.Second); err != nil {
		t.Errorf("ExecSync with a 1s timeout on a 200ms runtime = %v, want success", err)
	}
}

type versionServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	apiVersion string
}

func (s versionServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "old", RuntimeVersion: "1.0", RuntimeApiVersion: s.apiVersion}, nil
}

func serveGRPC(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	path := socketPath(t)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	register(g)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Serve(lis) })
	t.Cleanup(func() { g.Stop(); wg.Wait() })
	return "unix://" + path
}

func TestVersionCheck(t *testing.T) {
	t.Run("old API version", func(t *testing.T) {
		ep := serveGRPC(t, func(g *grpc.Server) {
			runtimeapi.RegisterRuntimeServiceServer(g, versionServer{apiVersion: "v1alpha2"})
		})
		c, err := cri.New(t.Context(), ep)
		if !errors.Is(err, cri.ErrUnsupportedVersion) {
			t.Errorf("New = %v, %v; want ErrUnsupportedVersion", c, err)
		}
	})
	t.Run("no v1 service", func(t *testing.T) {
		ep := serveGRPC(t, func(*grpc.Server) {})
		c, err := cri.New(t.Context(), ep)
		if !errors.Is(err, runtime.ErrUnimplemented) {
			t.Errorf("New = %v, %v; want ErrUnimplemented", c, err)
		}
	})
	t.Run("Version fails", func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		t.Cleanup(rt.Close)
		rt.InjectError("Version", status.Error(codes.Internal, "broken"))
		_, err := cri.New(t.Context(), serve(t, rt))
		if err == nil || status.Code(err) != codes.Internal {
			t.Errorf("New = %v; want the Internal status", err)
		}
	})
	t.Run("no socket", func(t *testing.T) {
		start := time.Now()
		_, err := cri.New(t.Context(), socketPath(t), cri.WithDialTimeout(300*time.Millisecond))
		if !errors.Is(err, runtime.ErrDeadlineExceeded) {
			t.Errorf("New on a missing socket = %v, want ErrDeadlineExceeded", err)
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
			t.Errorf("New on a missing socket took %v, want about the 300ms dial timeout", d)
		}
	})
	t.Run("socket appears later", func(t *testing.T) {
		// New waits (up to the dial timeout) for a runtime still starting.
		path := socketPath(t)
		rt := runtimetest.New(runtimetest.Options{})
		t.Cleanup(rt.Close)
		srv := runtimetest.NewServer(rt)
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		t.Cleanup(srv.Stop)
		wg.Go(func() {
			time.Sleep(300 * time.Millisecond)
			lis, err := net.Listen("unix", path)
			if err != nil {
				t.Error(err)
				return
			}
			_ = srv.Serve(lis)
		})
		c, err := cri.New(t.Context(), "unix://"+path, cri.WithDialTimeout(10*time.Second))
		if err != nil {
			t.Fatalf("New while the runtime starts: %v", err)
		}
		c.Close()
	})
	t.Run("CheckVersion on NewFromConn", func(t *testing.T) {
		ep := serveGRPC(t, func(g *grpc.Server) {
			runtimeapi.RegisterRuntimeServiceServer(g, versionServer{apiVersion: "0.1.0"})
		})
		conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c, err := cri.NewFromConn(conn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CheckVersion(t.Context()); !errors.Is(err, cri.ErrUnsupportedVersion) {
			t.Errorf("CheckVersion = %v, want ErrUnsupportedVersion", err)
		}
		if c.RuntimeVersion() != nil {
			t.Errorf("RuntimeVersion after a failed check = %v, want nil", c.RuntimeVersion())
		}
	})
}

// TestNewFromConn uses an in-process connection (bufconn): the client
// works on it, and Close leaves it open for its owner.
func TestNewFromConn(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	lis := bufconn.Listen(1 << 20)
	srv := runtimetest.NewServer(rt)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	defer wg.Wait()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := cri.NewFromConn(conn)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.CheckVersion(t.Context())
	if err != nil || v.RuntimeName != "runtimetest" {
		t.Fatalf("CheckVersion = %v, %v", v, err)
	}
	if _, err := c.RunPodSandbox(t.Context(), sandboxConfig("a", "u1"), ""); err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	// The connection is still the caller's, and open.
	sbs, err := runtimeapi.NewRuntimeServiceClient(conn).ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(sbs.Items) != 1 {
		t.Errorf("ListPodSandbox on the conn after Close = %v, %v; want 1 sandbox", sbs, err)
	}
	if _, err := cri.NewFromConn(nil); err == nil {
		t.Error("NewFromConn(nil) succeeded, want an error")
	}
}

func TestClose(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	c, err := cri.New(t.Context(), serve(t, rt))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := c.Version(t.Context(), "v1"); err == nil {
		t.Error("Version after Close succeeded, want an error")
	}
}

func TestEndpointsAndOptions(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		opts     []cri.Opt
		wantErr  string
	}{
		{name: "tcp", endpoint: "tcp://127.0.0.1:1234", wantErr: "not a unix socket"},
		{name: "relative", endpoint: "run/x.sock", wantErr: "not a unix socket"},
		{name: "empty path", endpoint: "unix://", wantErr: "no socket path"},
		{name: "zero timeout", endpoint: "/x.sock", opts: []cri.Opt{cri.WithTimeout(0)}, wantErr: "WithTimeout must be positive"},
		{name: "negative dial timeout", endpoint: "/x.sock", opts: []cri.Opt{cri.WithDialTimeout(-time.Second)}, wantErr: "WithDialTimeout must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cri.New(t.Context(), tc.endpoint, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New(%q) = %v, %v; want an error containing %q", tc.endpoint, c, err, tc.wantErr)
			}
		})
	}
}

// TestDialOptions: extra dial options are applied (an interceptor sees
// every call), and WithDialOptions replaces the defaults.
func TestDialOptions(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	ep := serve(t, rt)
	var mu sync.Mutex
	var seen []string
	icpt := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		seen = append(seen, method[strings.LastIndex(method, "/")+1:])
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c, err := cri.New(t.Context(), ep, cri.WithExtraDialOptions(icpt))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListContainers(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if d := cmp.Diff([]string{"Version", "ListContainers"}, seen); d != "" {
		t.Errorf("calls seen by the interceptor (-want +got):\n%s", d)
	}
	mu.Unlock()

	// Replacing the defaults drops the transport credentials: grpc refuses
	// to build the connection.
	if _, err := cri.New(t.Context(), ep, cri.WithDialOptions()); err == nil {
		t.Error("New with empty WithDialOptions succeeded, want a missing-credentials error")
	}
	c2, err := cri.New(t.Context(), ep, cri.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("New with replaced dial options: %v", err)
	}
	c2.Close()
}
