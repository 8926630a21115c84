package nodekit_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// envRuntime records the environment of each container created.
type envRuntime struct {
	*runtimetest.Runtime
	mu   sync.Mutex
	envs map[string][]string // by container name
}

func (r *envRuntime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	for _, kv := range cfg.GetEnvs() {
		r.envs[cfg.GetMetadata().GetName()] = append(r.envs[cfg.GetMetadata().GetName()], kv.GetKey()+"="+string(kv.GetValue()))
	}
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
}

// fixedServices is an env.Services of one Service in every namespace.
type fixedServices struct{ calls *atomic.Int64 }

func (s fixedServices) List(namespace string) ([]*v1.Service, error) {
	s.calls.Add(1)
	return []*v1.Service{{
		ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: namespace},
		Spec:       v1.ServiceSpec{ClusterIP: "10.0.0.5", Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}}, nil
}

func (fixedServices) HasSynced() bool { return true }

// Options.Services gives the containers their service links, in place of
// the agent's own informer (which only an agent with a KubeClient has).
func TestAgentServices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		wrapped := &envRuntime{Runtime: rt, envs: map[string][]string{}}
		var calls atomic.Int64
		src := make(chanSource, 1)
		startAgent(t, rt, nodekit.Options{Runtime: wrapped, Services: fixedServices{&calls}, Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
		pod := testPod("links", v1.RestartPolicyAlways, nil, "sleep 3600")
		links := true
		pod.Spec.EnableServiceLinks = &links
		src <- []*v1.Pod{pod}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wrapped.mu.Lock()
		env := slices.Clone(wrapped.envs[pod.Spec.Containers[0].Name])
		wrapped.mu.Unlock()
		if !slices.Contains(env, "FOO_SERVICE_HOST=10.0.0.5") || !slices.Contains(env, "FOO_SERVICE_PORT=80") {
			t.Errorf("container environment %v: want the service links of Options.Services", env)
		}
		if calls.Load() == 0 {
			t.Error("Options.Services not called")
		}
	})
}
