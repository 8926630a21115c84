// Command cri-rmpods stops and removes every pod sandbox (and so every
// container) of a CRI runtime, the way a node is drained before its runtime
// stops: hack/containerd.sh runs it before it stops a containerd, so that
// network namespaces and CNI allocations are released through CRI.
//
//	cri-rmpods -endpoint unix:///tmp/nodekit-containerd/containerd-1.6/containerd.sock
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI endpoint (unix:///path/to.sock or a socket path)")
	timeout := flag.Duration("timeout", time.Minute, "time allowed for the whole clean-up")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "cri-rmpods: -endpoint is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	n, err := run(ctx, *endpoint)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-rmpods: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("cri-rmpods: removed %d pod sandboxes\n", n)
}

func run(ctx context.Context, endpoint string) (int, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "unix://" + endpoint
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return 0, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []string
	for _, s := range resp.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Sprintf("stop %s: %v", s.Id, err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Sprintf("remove %s: %v", s.Id, err))
		}
	}
	// Containers whose sandbox is gone already are removed one by one.
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return len(resp.Items), fmt.Errorf("listing containers: %w", err)
	}
	for _, c := range cs.Containers {
		if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil {
			errs = append(errs, fmt.Sprintf("remove container %s: %v", c.Id, err))
		}
	}
	if len(errs) > 0 {
		return len(resp.Items), fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return len(resp.Items), nil
}
