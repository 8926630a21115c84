package runtimetest

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// Compile-time checks: Server is a CRI v1 gRPC server.
var (
	_ runtimeapi.RuntimeServiceServer = (*Server)(nil)
	_ runtimeapi.ImageServiceServer   = (*Server)(nil)
)

// Server serves a Runtime over gRPC as the CRI v1 RuntimeService and
// ImageService, so that tests and benchmarks of a CRI client (runtime/cri)
// get a real transport without a container runtime. The methods Runtime
// has delegate to it, with its errors (gRPC statuses), latency, call
// counts and injected faults; the others (Exec, Attach, PortForward,
// stats, checkpoints, RuntimeConfig, ImageFsInfo, ...) answer
// Unimplemented. It is safe for concurrent use.
//
// # Usage
//
//	rt := runtimetest.New(runtimetest.Options{})
//	defer rt.Close()
//	srv := runtimetest.NewServer(rt)
//	lis, _ := net.Listen("unix", filepath.Join(t.TempDir(), "cri.sock"))
//	go srv.Serve(lis)
//	defer srv.Stop()
//	client, _ := cri.New(ctx, "unix://"+lis.Addr().String())
//
// or register it on a *grpc.Server of your own with Register.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	rt *Runtime

	mu      sync.Mutex
	grpcSrv *grpc.Server
	stopped bool
}

// NewServer returns a Server for rt. It starts nothing: call Serve, or
// Register on a grpc.Server.
func NewServer(rt *Runtime) *Server {
	return &Server{rt: rt}
}

// Register registers the Server's runtime and image services on s.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	runtimeapi.RegisterRuntimeServiceServer(g, s)
	runtimeapi.RegisterImageServiceServer(g, s)
}

// Serve serves lis until Stop, on a grpc.Server of its own (with the 16
// MiB message limits of a CRI runtime and opts); it returns nil after
// Stop, or the error that ended it. Serve may be called once; calling it
// after Stop returns nil at once.
func (s *Server) Serve(lis net.Listener, opts ...grpc.ServerOption) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = lis.Close()
		return nil
	}
	if s.grpcSrv != nil {
		s.mu.Unlock()
		return errors.New("runtimetest: Serve called twice")
	}
	opts = append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMsgSize),
		grpc.MaxSendMsgSize(maxMsgSize),
	}, opts...)
	g := grpc.NewServer(opts...)
	s.Register(g)
	s.grpcSrv = g
	s.mu.Unlock()
	err := g.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// maxMsgSize is the message limit of the server, containerd's.
const maxMsgSize = 16 << 20

// Stop stops Serve at once, closing the listener and every connection;
// calls in progress fail with an Unavailable status. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	g := s.grpcSrv
	s.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// Version implements runtimeapi.RuntimeServiceServer.
func (s *Server) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return s.rt.Version(ctx, req.GetVersion())
}

// Status implements runtimeapi.RuntimeServiceServer.
func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return s.rt.Status(ctx, req.GetVerbose())
}

// RunPodSandbox implements runtimeapi.RuntimeServiceServer.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := s.rt.RunPodSandbox(ctx, req.GetConfig(), req.GetRuntimeHandler())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox implements runtimeapi.RuntimeServiceServer.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := s.rt.StopPodSandbox(ctx, req.GetPodSandboxId()); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox implements runtimeapi.RuntimeServiceServer.
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := s.rt.RemovePodSandbox(ctx, req.GetPodSandboxId()); err != nil {
		return nil, err
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus implements runtimeapi.RuntimeServiceServer.
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return s.rt.PodSandboxStatus(ctx, req.GetPodSandboxId(), req.GetVerbose())
}

// ListPodSandbox implements runtimeapi.RuntimeServiceServer.
func (s *Server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.rt.ListPodSandbox(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// CreateContainer implements runtimeapi.RuntimeServiceServer.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := s.rt.CreateContainer(ctx, req.GetPodSandboxId(), req.GetConfig(), req.GetSandboxConfig())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer implements runtimeapi.RuntimeServiceServer.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := s.rt.StartContainer(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer implements runtimeapi.RuntimeServiceServer.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := s.rt.StopContainer(ctx, req.GetContainerId(), req.GetTimeout()); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer implements runtimeapi.RuntimeServiceServer.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.rt.RemoveContainer(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ListContainers implements runtimeapi.RuntimeServiceServer.
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	ctrs, err := s.rt.ListContainers(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: ctrs}, nil
}

// ContainerStatus implements runtimeapi.RuntimeServiceServer.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return s.rt.ContainerStatus(ctx, req.GetContainerId(), req.GetVerbose())
}

// UpdateContainerResources implements runtimeapi.RuntimeServiceServer.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	res := &runtimeapi.ContainerResources{Linux: req.GetLinux(), Windows: req.GetWindows()}
	if err := s.rt.UpdateContainerResources(ctx, req.GetContainerId(), res); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ExecSync implements runtimeapi.RuntimeServiceServer: a command that
// exits non-zero is a response with its exit code, not an error, as in a
// CRI runtime.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	timeout := time.Duration(req.GetTimeout()) * time.Second
	stdout, stderr, err := s.rt.ExecSync(ctx, req.GetContainerId(), req.GetCmd(), timeout)
	var exit utilexec.CodeExitError
	switch {
	case errors.As(err, &exit):
		return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr, ExitCode: int32(exit.Code)}, nil
	case err != nil:
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr}, nil
}

// GetContainerEvents implements runtimeapi.RuntimeServiceServer: the
// Runtime's events, until the client goes away or the Runtime ends the
// stream (closed, set down, an injected error).
func (s *Server) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	events := make(chan *runtimeapi.ContainerEventResponse)
	done := make(chan error, 1)
	go func() { done <- s.rt.GetContainerEvents(ctx, events, nil) }()
	for {
		select {
		case ev := <-events:
			if err := stream.Send(ev); err != nil {
				cancel()
				<-done
				return err
			}
		case err := <-done:
			return err
		}
	}
}

// ListImages implements runtimeapi.ImageServiceServer.
func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := s.rt.ListImages(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

// ImageStatus implements runtimeapi.ImageServiceServer.
func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return s.rt.ImageStatus(ctx, req.GetImage(), req.GetVerbose())
}

// PullImage implements runtimeapi.ImageServiceServer.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := s.rt.PullImage(ctx, req.GetImage(), req.GetAuth(), req.GetSandboxConfig())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

// RemoveImage implements runtimeapi.ImageServiceServer.
func (s *Server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if err := s.rt.RemoveImage(ctx, req.GetImage()); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}
