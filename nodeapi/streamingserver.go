package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// StreamingRuntime runs the sessions of a StreamingServer: the
// k8s.io/cri-streaming runtime interface.
type StreamingRuntime = streaming.Runtime

// StreamingServerOptions configure a StreamingServer.
type StreamingServerOptions struct {
	// Address to listen on. Defaults to 127.0.0.1:0: only the node API's
	// proxy reaches it, with single-use tokens.
	Address string
	// StreamIdleTimeout closes a session idle that long. Defaults to 4
	// hours (the kubelet's --streaming-connection-idle-timeout).
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds how long a client takes to open its
	// streams. Defaults to 30 seconds.
	StreamCreationTimeout time.Duration
}

// StreamingServer serves exec, attach and port-forward sessions for a
// runtime without a streaming server of its own (the in-memory runtime,
// or one built on nodekit's interfaces), with the CRI streaming server
// of k8s.io/cri-streaming, the one the kubelet and CRI runtimes use. It
// is a Streamer: its URLs, valid once and for a short time, point at its
// own loopback listener, and the node API proxies clients to them. Its
// Exec, Attach and PortForward fail until Run listens.
type StreamingServer struct {
	rt   StreamingRuntime
	opts StreamingServerOptions

	mu    sync.Mutex
	srv   streaming.Server
	ready chan struct{}
}

var _ Streamer = (*StreamingServer)(nil)

// NewStreamingServer returns a server for rt.
func NewStreamingServer(rt StreamingRuntime, opts StreamingServerOptions) (*StreamingServer, error) {
	if rt == nil {
		return nil, errors.New("nodeapi: NewStreamingServer needs a runtime")
	}
	if opts.Address == "" {
		opts.Address = "127.0.0.1:0"
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = streaming.DefaultConfig.StreamIdleTimeout
	}
	if opts.StreamCreationTimeout == 0 {
		opts.StreamCreationTimeout = streaming.DefaultConfig.StreamCreationTimeout
	}
	return &StreamingServer{rt: rt, opts: opts, ready: make(chan struct{})}, nil
}

// Run listens and serves sessions until ctx ends, then closes them and
// returns nil.
func (s *StreamingServer) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("nodeapi: streaming server: %w", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = ln.Addr().String()
	cfg.StreamIdleTimeout = s.opts.StreamIdleTimeout
	cfg.StreamCreationTimeout = s.opts.StreamCreationTimeout
	srv, err := streaming.NewServer(cfg, s.rt)
	if err != nil {
		ln.Close()
		return fmt.Errorf("nodeapi: streaming server: %w", err)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.srv = nil
		s.mu.Unlock()
	}()

	inner, err := NewServer(srv, ServerOptions{Listener: ln, Insecure: true, ShutdownTimeout: time.Second})
	if err != nil {
		ln.Close()
		return err
	}
	return inner.Run(ctx)
}

func (s *StreamingServer) server() (streaming.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return nil, errors.New("nodeapi: the streaming server is not running")
	}
	return s.srv, nil
}

// Exec implements Streamer.
func (s *StreamingServer) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	srv, err := s.server()
	if err != nil {
		return nil, err
	}
	return srv.GetExec(req)
}

// Attach implements Streamer.
func (s *StreamingServer) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	srv, err := s.server()
	if err != nil {
		return nil, err
	}
	return srv.GetAttach(req)
}

// PortForward implements Streamer.
func (s *StreamingServer) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	srv, err := s.server()
	if err != nil {
		return nil, err
	}
	return srv.GetPortForward(req)
}

// ExecSyncer runs a command to completion (runtime.RuntimeService's
// ExecSync).
type ExecSyncer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error)
}

// ExecOnlyRuntime is a StreamingRuntime for a runtime that can only run
// commands to completion (ExecSync): exec without stdin or a terminal.
// The command's output is written when it ends, and a
// k8s.io/utils/exec.ExitError from ExecSync becomes the session's exit
// code. Attach and port-forward are not supported.
type ExecOnlyRuntime struct {
	Runtime ExecSyncer
}

var _ StreamingRuntime = ExecOnlyRuntime{}

// Exec implements StreamingRuntime.
func (r ExecOnlyRuntime) Exec(ctx context.Context, containerID string, cmd []string, _ io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	stdout, stderr, err := r.Runtime.ExecSync(ctx, containerID, cmd, 0)
	if out != nil {
		out.Write(stdout)
	}
	if errw != nil {
		errw.Write(stderr)
	}
	return err
}

// Attach implements StreamingRuntime: not supported.
func (ExecOnlyRuntime) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommand.TerminalSize) error {
	return errors.New("nodeapi: this runtime does not support attach")
}

// PortForward implements StreamingRuntime: not supported.
func (ExecOnlyRuntime) PortForward(context.Context, string, int32, io.ReadWriteCloser) error {
	return errors.New("nodeapi: this runtime does not support port forwarding")
}
