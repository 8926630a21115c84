package cri_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestWireLists: ListPodSandboxWire and ListContainersWire answer the
// bytes that decode to what ListPodSandbox and ListContainers answer,
// with each filter, into a caller's buffer or a new one, and send the
// runtime the same request with the same content type.
func TestWireLists(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	var mu sync.Mutex
	contentTypes := map[string][]string{} // by method
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		contentTypes[info.FullMethod] = append(contentTypes[info.FullMethod], md.Get("content-type")...)
		mu.Unlock()
		return h(ctx, req)
	}))
	runtimetest.NewServer(rt).Register(srv)
	path := socketPath(t)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c, err := cri.NewFromConn(conn)
	if err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	for i, uid := range []string{"uid-1", "uid-2", "uid-3"} {
		sc := sandboxConfig("pod-"+uid, uid)
		sc.Annotations = map[string]string{"a": uid}
		sid, err := c.RunPodSandbox(ctx, sc, "")
		if err != nil {
			t.Fatal(err)
		}
		cid, err := c.CreateContainer(ctx, sid, containerConfig("app", uid), sc)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := c.StartContainer(ctx, cid); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			if err := c.StopPodSandbox(ctx, sid); err != nil {
				t.Fatal(err)
			}
		}
	}

	sandboxFilters := []*runtimeapi.PodSandboxFilter{
		nil,
		{LabelSelector: map[string]string{runtime.LabelPodUID: "uid-2"}},
		{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		{LabelSelector: map[string]string{runtime.LabelPodUID: "none"}},
	}
	for _, f := range sandboxFilters {
		want, err := c.ListPodSandbox(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, buf := range [][]byte{nil, make([]byte, 7, 1<<16)} {
			b, err := c.ListPodSandboxWire(ctx, f, buf)
			if err != nil {
				t.Fatalf("ListPodSandboxWire(%v): %v", f, err)
			}
			var got runtimeapi.ListPodSandboxResponse
			if err := proto.Unmarshal(b, &got); err != nil {
				t.Fatalf("ListPodSandboxWire(%v) answered bytes that do not decode: %v", f, err)
			}
			if d := diffProto(want, got.Items); d != "" {
				t.Errorf("ListPodSandboxWire(%v) (-ListPodSandbox +wire):\n%s", f, d)
			}
			if cap(buf) >= len(b) && len(b) > 0 && &buf[:1][0] != &b[0] {
				t.Errorf("ListPodSandboxWire did not use the buffer given, large enough")
			}
		}
	}
	containerFilters := []*runtimeapi.ContainerFilter{
		nil,
		{LabelSelector: map[string]string{runtime.LabelPodUID: "uid-3"}},
		{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	}
	for _, f := range containerFilters {
		want, err := c.ListContainers(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.ListContainersWire(ctx, f, nil)
		if err != nil {
			t.Fatalf("ListContainersWire(%v): %v", f, err)
		}
		var got runtimeapi.ListContainersResponse
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("ListContainersWire(%v) answered bytes that do not decode: %v", f, err)
		}
		if d := diffProto(want, got.Containers); d != "" || len(want) == 0 {
			t.Errorf("ListContainersWire(%v) (-ListContainers +wire), want some:\n%s", f, d)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, m := range []string{runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, runtimeapi.RuntimeService_ListContainers_FullMethodName} {
		cts := contentTypes[m]
		if len(cts) == 0 {
			t.Errorf("%s: no call seen", m)
		}
		for _, ct := range cts {
			if ct != "application/grpc" {
				t.Errorf("%s: content type %q, want application/grpc for every call (decoded and wire)", m, ct)
			}
		}
	}
}

// TestWireListErrors: the wire lists fail as the decoded ones do: an
// *Error of the status's class, named after the CRI method.
func TestWireListErrors(t *testing.T) {
	c, rt := newClient(t, runtimetest.Options{})
	for _, tc := range []struct {
		method string
		call   func(context.Context) ([]byte, error)
	}{
		{"ListPodSandbox", func(ctx context.Context) ([]byte, error) { return c.ListPodSandboxWire(ctx, nil, nil) }},
		{"ListContainers", func(ctx context.Context) ([]byte, error) { return c.ListContainersWire(ctx, nil, nil) }},
	} {
		rt.InjectErrorOnce(tc.method, status.Error(codes.Unavailable, "boom"))
		b, err := tc.call(t.Context())
		var e *cri.Error
		if !errors.As(err, &e) || e.Method != tc.method || !errors.Is(err, runtime.ErrUnavailable) || b != nil {
			t.Errorf("%s wire with an Unavailable runtime = %d bytes, %v; want a *cri.Error of class ErrUnavailable", tc.method, len(b), err)
		}
		rt.InjectErrorOnce(tc.method, status.Error(codes.Unimplemented, "no"))
		if _, err := tc.call(t.Context()); !errors.Is(err, runtime.ErrUnimplemented) {
			t.Errorf("%s wire with an Unimplemented answer = %v, want ErrUnimplemented", tc.method, err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := tc.call(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s wire with a canceled context = %v, want context.Canceled", tc.method, err)
		}
	}
}
