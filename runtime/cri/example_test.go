package cri_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// ExampleNew connects to a CRI runtime, here the in-memory runtime served
// on a unix socket; an agent would pass containerd's socket.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "cri")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "cri.sock")

	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	srv := runtimetest.NewServer(rt)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()

	ctx := context.Background()
	c, err := cri.New(ctx, "unix://"+sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	v := c.RuntimeVersion()
	fmt.Println(v.RuntimeName, v.RuntimeApiVersion)

	_, err = c.ContainerStatus(ctx, "no-such-container", false)
	fmt.Println(errors.Is(err, runtime.ErrNotFound))
	// Output:
	// runtimetest v1
	// true
}
