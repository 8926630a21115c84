package nodekit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// crashingRuntime goes down in the middle of its first RunPodSandbox: the
// sandbox is made but left not ready, and the agent gets an error, as when
// containerd is killed while it creates a sandbox.
type crashingRuntime struct {
	*runtimetest.Runtime
	crashed  atomic.Bool
	halfMade atomic.Value // string
}

func (r *crashingRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if r.crashed.Swap(true) {
		return r.Runtime.RunPodSandbox(ctx, config, handler)
	}
	id, err := r.Runtime.RunPodSandbox(ctx, config, handler)
	if err != nil {
		return "", err
	}
	if err := r.Runtime.StopPodSandbox(ctx, id); err != nil {
		return "", err
	}
	r.halfMade.Store(id)
	r.Runtime.SetDown(true)
	return "", status.Error(codes.Unavailable, "connection closed while creating the sandbox")
}

// TestAgentCollectsSandboxLeakedByRuntimeCrash: a runtime crash during
// RunPodSandbox leaves a half-made sandbox; the agent goes on with a new
// one once the runtime is back, and the half-made one is stopped and
// removed within seconds of the new one (not at the collector's next
// one-minute period). With the container collector off, it stays.
func TestAgentCollectsSandboxLeakedByRuntimeCrash(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
	}{{"collector on", false}, {"collector off", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &crashingRuntime{Runtime: runtimetest.New(runtimetest.Options{})}
				defer rt.Close()
				src := make(chanSource, 1)
				logs := &logBuffer{}
				a, err := nodekit.New(nodekit.Options{
					NodeName:            "node1",
					Sources:             []nodekit.NamedSource{{Name: "test", Source: src}},
					Runtime:             rt,
					RootDir:             t.TempDir(),
					RuntimeStatusPeriod: time.Second,
					RuntimeManager:      podruntime.Options{PodLogsDir: t.TempDir()},
					Cgroups:             cgroup.PodManagerOptions{Disabled: true},
					NodeResources:       nodekit.NodeResourcesOptions{GC: nodekit.GCOptions{DisableContainers: tc.disable}},
					Logger:              logs.logger(t),
				})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- a.Run(ctx) }()
				defer func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
					if t.Failed() {
						logs.dump(t)
					}
				}()
				src <- []*v1.Pod{testPod("a", v1.RestartPolicyAlways, nil, "sleep 3600")}
				time.Sleep(10 * time.Second) // the runtime is down
				synctest.Wait()
				halfMade, _ := rt.halfMade.Load().(string)
				if halfMade == "" {
					t.Fatal("the runtime did not crash during RunPodSandbox")
				}
				rt.SetDown(false)
				// The pod's sync retries within 15s (error back-off 10s
				// ±50%); the collector's period is a minute.
				time.Sleep(30 * time.Second)
				synctest.Wait()
				sbs, err := rt.ListPodSandbox(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				leaked := false
				for _, s := range sbs {
					ids = append(ids, s.Id)
					leaked = leaked || s.Id == halfMade
				}
				if tc.disable {
					if !leaked || len(sbs) != 2 {
						t.Errorf("sandboxes %v: without the collector, want the half-made %s and a new one", ids, halfMade)
					}
					return
				}
				if leaked || len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
					t.Errorf("sandboxes %v 30s after the runtime returned: want one ready sandbox, the half-made %s removed", ids, halfMade)
				}
				if rt.Calls("StopPodSandbox") < 2 { // the crash's own stop, then the collector's
					t.Errorf("the half-made sandbox was not stopped (its network torn down) before removal")
				}
			})
		})
	}
}
