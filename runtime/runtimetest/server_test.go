package runtimetest

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
)

// serveUnix serves r on a unix socket until the test ends and returns a
// connection to it.
func serveUnix(t *testing.T, r *Runtime) (*Server, *grpc.ClientConn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rtt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lis, err := net.Listen("unix", filepath.Join(dir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(r)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v, want nil after Stop", err)
		}
	})
	return srv, conn
}

func TestServerDelegates(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	_, conn := serveUnix(t, r)
	rc := runtimeapi.NewRuntimeServiceClient(conn)
	ic := runtimeapi.NewImageServiceClient(conn)
	ctx := t.Context()

	sc := sandboxConfig("p", "uid-s")
	sb, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sc})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	ctr, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId, Config: containerConfig("c", "sleep", "infinity"), SandboxConfig: sc,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	// What the server lists is what the runtime holds.
	list, err := rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := r.ListContainers(ctx, nil)
	if d := cmp.Diff(want, list.Containers, protocmp.Transform()); d != "" {
		t.Errorf("ListContainers (-want +got):\n%s", d)
	}
	imgs, err := ic.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(imgs.Images) != 1 {
		t.Errorf("ListImages = %v, %v; want busybox", imgs, err)
	}

	// ExecSync: a non-zero exit is a response, not an error.
	r.SetExecHandler(func(string, []string) ([]byte, []byte, int32) { return []byte("o"), []byte("e"), 7 })
	ex, err := rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.ContainerId, Cmd: []string{"x"}})
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if d := cmp.Diff(&runtimeapi.ExecSyncResponse{Stdout: []byte("o"), Stderr: []byte("e"), ExitCode: 7}, ex, protocmp.Transform()); d != "" {
		t.Errorf("ExecSync (-want +got):\n%s", d)
	}

	// Statuses pass through: the runtime's NotFound, injected errors, and
	// Unimplemented for what the runtime lacks.
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"unknown container", func() error {
			_, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
			return err
		}, codes.NotFound},
		{"exec in unknown container", func() error {
			_, err := rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "nope"})
			return err
		}, codes.NotFound},
		{"injected", func() error {
			r.InjectErrorOnce("StopPodSandbox", status.Error(codes.ResourceExhausted, "x"))
			_, err := rc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
			return err
		}, codes.ResourceExhausted},
		{"RuntimeConfig", func() error {
			_, err := rc.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
			return err
		}, codes.Unimplemented},
		{"ImageFsInfo", func() error {
			_, err := ic.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
			return err
		}, codes.Unimplemented},
		{"down", func() error {
			r.SetDown(true)
			defer r.SetDown(false)
			_, err := rc.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		}, codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call()); got != tc.want {
				t.Errorf("code = %v, want %v", got, tc.want)
			}
		})
	}

	if _, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctr.ContainerId, Timeout: 3}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if got, ok := r.LastStopTimeout(ctr.ContainerId); !ok || got != 3 {
		t.Errorf("LastStopTimeout = %d, %v; want 3", got, ok)
	}
	for _, step := range []func() error{
		func() error {
			_, err := rc.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ctr.ContainerId})
			return err
		},
		func() error {
			_, err := rc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
			return err
		},
		func() error {
			_, err := rc.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
			return err
		},
		func() error {
			_, err := ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("clean-up: %v", err)
		}
	}
	if n := len(r.Sandboxes()) + len(r.Containers()); n != 0 {
		t.Errorf("%d objects left, want 0", n)
	}
	if r.Calls("StopContainer") != 1 || r.Calls("RemoveImage") != 1 {
		t.Errorf("calls StopContainer=%d RemoveImage=%d, want 1 each", r.Calls("StopContainer"), r.Calls("RemoveImage"))
	}
}

func TestServerEvents(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	_, conn := serveUnix(t, r)
	rc := runtimeapi.NewRuntimeServiceClient(conn)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := rc.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Events are sent to the subscribers registered when they happen.
	for {
		r.mu.Lock()
		n := len(r.subs)
		r.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	sid, err := r.RunPodSandbox(t.Context(), sandboxConfig("p", "u"), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []runtimeapi.ContainerEventType
	for range 2 {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if ev.ContainerId != sid || ev.PodSandboxStatus.GetId() != sid {
			t.Errorf("event about %s (sandbox %s), want %s", ev.ContainerId, ev.PodSandboxStatus.GetId(), sid)
		}
		got = append(got, ev.ContainerEventType)
	}
	want := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	// The runtime ending the stream ends the RPC with its status.
	r.Close()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Recv after the runtime closed = %v, want Unavailable", err)
	}

	// An injected Unimplemented answers the first Recv.
	r2 := New(Options{})
	defer r2.Close()
	r2.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "no events"))
	_, conn2 := serveUnix(t, r2)
	s2, err := runtimeapi.NewRuntimeServiceClient(conn2).GetContainerEvents(t.Context(), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("Recv = %v, want Unimplemented", err)
	}
}

// TestServerStop: Stop ends Serve and open streams; Serve after Stop
// returns at once; Serve twice fails; Register works on a server of one's
// own (here over bufconn).
func TestServerStop(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	srv, conn := serveUnix(t, r)
	rc := runtimeapi.NewRuntimeServiceClient(conn)
	stream, err := rc.GetContainerEvents(t.Context(), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(bufconn.Listen(1024)); err == nil {
		t.Error("second Serve = nil, want an error")
	}
	srv.Stop()
	srv.Stop()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Recv after Stop = %v, want Unavailable", err)
	}
	if err := stoppedServer(r).Serve(bufconn.Listen(1024)); err != nil {
		t.Errorf("Serve after Stop = %v, want nil", err)
	}

	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	NewServer(r).Register(g)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Serve(lis) })
	defer wg.Wait()
	defer g.Stop()
	bc, err := grpc.NewClient("passthrough:///buf",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	v, err := runtimeapi.NewRuntimeServiceClient(bc).Version(t.Context(), &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "runtimetest" {
		t.Errorf("Version over a registered server = %v, %v", v, err)
	}
}

// stoppedServer returns a stopped server.
func stoppedServer(r *Runtime) *Server {
	s := NewServer(r)
	s.Stop()
	return s
}
