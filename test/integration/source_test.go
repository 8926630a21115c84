package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// recorder keeps the updates of a sources.Config.
type recorder struct {
	mu      sync.Mutex
	updates []sources.PodUpdate
}

func (r *recorder) run(ctx context.Context, cfg *sources.Config) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-cfg.Updates():
			r.mu.Lock()
			r.updates = append(r.updates, u)
			r.mu.Unlock()
		}
	}
}

// find returns the first update with op that holds the pod named name.
func (r *recorder) find(op sources.Op, name string) (*v1.Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.updates {
		if u.Op != op {
			continue
		}
		for _, p := range u.Pods {
			if p.Name == name {
				return p, true
			}
		}
	}
	return nil, false
}

// names returns the names of every pod any update held.
func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, u := range r.updates {
		for _, p := range u.Pods {
			if !slices.Contains(out, p.Name) {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

func (r *recorder) waitFor(t *testing.T, op sources.Op, name string) *v1.Pod {
	t.Helper()
	return r.waitWithin(t, 10*time.Second, op, name)
}

// waitWithin is waitFor with a timeout.
func (r *recorder) waitWithin(t *testing.T, timeout time.Duration, op sources.Op, name string) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	eventually(t, timeout, fmt.Sprintf("%v of %s", op, name), func() error {
		var ok bool
		if p, ok = r.find(op, name); !ok {
			return fmt.Errorf("updates so far hold %v", r.names())
		}
		return nil
	})
	return p
}

// runSource runs the API-server source of the node nodeName in a
// sources.Config, recording its updates; it talks to the API server of
// kubeconfig through kubeclient, as an agent does.
func runSource(t *testing.T, kubeconfig, nodeName string, opts apiserver.Options) (*sources.Config, *recorder) {
	t.Helper()
	opts.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 3})
	src, err := apiserver.New(newAgentClient(t, kubeconfig), nodeName, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sources.NewConfig(sources.ConfigOptions{Logger: testr.New(t)})
	if err := cfg.Add(sources.APIServerSource, src); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	runInBackground(t, "sources", cfg.Run)
	runInBackground(t, "recorder", func(ctx context.Context) error { return rec.run(ctx, cfg) })
	return cfg, rec
}

// The pods bound to the node reach the merge as ADD, a graceful deletion
// as DELETE, the object's removal as REMOVE; a pod of another node never
// arrives.
func TestAPISource(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("it-src")
	other := uniqueName("it-other")
	before := createPod(t, c, newPod(uniqueName("before"), nodeName))
	createPod(t, c, newPod(uniqueName("foreign-before"), other))

	cfg, rec := runSource(t, kubeconfig(t), nodeName, apiserver.Options{})
	eventually(t, 10*time.Second, "sources ready", func() error {
		if !cfg.SourcesReady() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	p := rec.waitFor(t, sources.Add, before.Name)
	if p.UID != before.UID || p.Annotations[sources.AnnotationSource] != sources.APIServerSource {
		t.Errorf("ADD of %s: UID %s, source %q; want %s, %q", p.Name, p.UID, p.Annotations[sources.AnnotationSource], before.UID, sources.APIServerSource)
	}

	after := createPod(t, c, newPod(uniqueName("after"), nodeName))
	createPod(t, c, newPod(uniqueName("foreign-after"), other))
	rec.waitFor(t, sources.Add, after.Name)

	// A pod bound to a node is deleted gracefully: it gets a
	// deletionTimestamp and stays until the node agent deletes it.
	if err := c.CoreV1().Pods(after.Namespace).Delete(t.Context(), after.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := rec.waitFor(t, sources.Delete, after.Name); p.DeletionTimestamp == nil {
		t.Errorf("DELETE of %s without a deletionTimestamp", p.Name)
	}
	if err := c.CoreV1().Pods(after.Namespace).Delete(t.Context(), after.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, sources.Remove, after.Name)

	for _, name := range rec.names() {
		if name != before.Name && name != after.Name {
			t.Errorf("the source delivered pod %s, not bound to %s", name, nodeName)
		}
	}
}
