package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimesuite"
)

// TestRuntimeSuite runs the runtime conformance suite on containerd 1.6
// and 2.x through the CRI client, with real processes in the busybox image
// hack/containerd.sh imports. A restart is a new client on the same socket.
func TestRuntimeSuite(t *testing.T) {
	for _, v := range []struct{ name, env string }{{"containerd-1.6", envEndpoint}, {"containerd-2", envEndpoint2}} {
		t.Run(v.name, func(t *testing.T) {
			ep := endpointFrom(t, v.env)
			runtimesuite.Run(t, func(t *testing.T) runtimesuite.Config {
				var mu sync.Mutex
				var clients []*cri.Client
				dial := func(t *testing.T) runtime.RuntimeService {
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					c, err := cri.New(ctx, ep)
					if err != nil {
						t.Fatalf("cri.New(%s): %v", ep, err)
					}
					mu.Lock()
					clients = append(clients, c)
					mu.Unlock()
					return c
				}
				// Registered before the suite's own clean-ups, so the
				// clients close after the suite removed its pods.
				t.Cleanup(func() {
					for _, c := range clients {
						c.Close()
					}
				})
				return runtimesuite.Config{Runtime: dial(t), Processes: true, Image: "busybox:1.36", Restart: dial}
			})
		})
	}
}
