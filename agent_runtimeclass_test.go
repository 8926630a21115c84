package nodekit_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentRuntimeClasses: a standalone agent given RuntimeClasses runs a
// pod of a known class with the class's handler, rejects one naming a
// class that does not exist (Failed, reason RuntimeClass, Warning event)
// and runs a pod without a class with the default handler.
func TestAgentRuntimeClasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		rec := record.NewFakeRecorder(1000)
		src := make(chanSource, 1)
		classes := nodekit.RuntimeClassGetterFunc(func(name string) (*nodev1.RuntimeClass, error) {
			if name == "fast" {
				return &nodev1.RuntimeClass{Handler: "runc-fast"}, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
		})
		h := startAgent(t, rt, nodekit.Options{
			Events:         rec,
			RuntimeClasses: classes,
			Sources:        []nodekit.NamedSource{{Name: "test", Source: src}},
			Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
		})
		known := testPod("known", v1.RestartPolicyAlways, nil, "sleep 3600")
		known.Spec.RuntimeClassName = ptrTo("fast")
		missing := testPod("missing", v1.RestartPolicyAlways, nil, "sleep 3600")
		missing.Spec.RuntimeClassName = ptrTo("kata")
		plain := testPod("plain", v1.RestartPolicyAlways, nil, "sleep 3600")
		src <- []*v1.Pod{known, missing, plain}
		time.Sleep(5 * time.Second)
		synctest.Wait()

		handlers := map[string]string{}
		for _, s := range rt.Sandboxes() {
			handlers[s.Name] = s.RuntimeHandler
		}
		if want := map[string]string{"known": "runc-fast", "plain": ""}; !maps.Equal(handlers, want) {
			t.Errorf("sandbox handlers %v, want %v", handlers, want)
		}
		msg := `runtimeclasses.node.k8s.io "kata" not found`
		if s, _ := h.status("default/missing"); s.Phase != v1.PodFailed || s.Reason != "RuntimeClass" || s.Message != "Pod was rejected: "+msg {
			t.Errorf("missing: status %s/%s %q", s.Phase, s.Reason, s.Message)
		}
		var events []string
		for len(rec.Events) > 0 {
			events = append(events, <-rec.Events)
		}
		if want := "Warning RuntimeClass " + msg; !slices.Contains(events, want) {
			t.Errorf("no event %q in %q", want, events)
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// handlersRuntime is the in-memory runtime whose Status lists runtime
// handlers, as containerd 2.x does.
type handlersRuntime struct {
	*runtimetest.Runtime
	handlers []string
}

func (r handlersRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := r.Runtime.Status(ctx, verbose)
	if err != nil {
		return nil, err
	}
	for _, h := range r.handlers {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: h})
	}
	return resp, nil
}

// TestAgentRuntimeClassUnknownHandler: a pod whose RuntimeClass names a
// handler the runtime does not list in its CRI Status is rejected (Failed,
// reason RuntimeClass, Warning event) and gets no sandbox; a pod of a
// class whose handler is listed runs with it.
func TestAgentRuntimeClassUnknownHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		rec := record.NewFakeRecorder(1000)
		src := make(chanSource, 1)
		classes := nodekit.RuntimeClassGetterFunc(func(name string) (*nodev1.RuntimeClass, error) {
			switch name {
			case "fast":
				return &nodev1.RuntimeClass{Handler: "runc-fast"}, nil
			case "wasm":
				return &nodev1.RuntimeClass{Handler: "runwasi"}, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
		})
		var mu sync.Mutex
		statuses := map[string]v1.PodStatus{}
		a, err := nodekit.New(nodekit.Options{
			NodeName:       "node1",
			Runtime:        handlersRuntime{Runtime: rt, handlers: []string{"", "runc", "runc-fast"}},
			Images:         rt,
			RootDir:        t.TempDir(),
			Cgroups:        cgroup.PodManagerOptions{Disabled: true},
			Events:         rec,
			RuntimeClasses: classes,
			Sources:        []nodekit.NamedSource{{Name: "test", Source: src}},
			Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
			OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
				mu.Lock()
				statuses[pod.Name] = s
				mu.Unlock()
			},
			RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
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
				t.Errorf("Agent.Run: %v", err)
			}
		}()
		// The runtime's handlers are known from its first Status.
		time.Sleep(time.Second)
		synctest.Wait()

		known := testPod("known", v1.RestartPolicyAlways, nil, "sleep 3600")
		known.Spec.RuntimeClassName = ptrTo("fast")
		wasm := testPod("wasm", v1.RestartPolicyAlways, nil, "sleep 3600")
		wasm.Spec.RuntimeClassName = ptrTo("wasm")
		src <- []*v1.Pod{known, wasm}
		time.Sleep(5 * time.Second)
		synctest.Wait()

		handlers := map[string]string{}
		for _, s := range rt.Sandboxes() {
			handlers[s.Name] = s.RuntimeHandler
		}
		if want := map[string]string{"known": "runc-fast"}; !maps.Equal(handlers, want) {
			t.Errorf("sandbox handlers %v, want %v", handlers, want)
		}
		msg := `RuntimeClass "wasm" names the runtime handler "runwasi", which this node does not offer`
		mu.Lock()
		s := statuses["wasm"]
		mu.Unlock()
		if s.Phase != v1.PodFailed || s.Reason != "RuntimeClass" || s.Message != "Pod was rejected: "+msg {
			t.Errorf("wasm: status %s/%s %q", s.Phase, s.Reason, s.Message)
		}
		var events []string
		for len(rec.Events) > 0 {
			events = append(events, <-rec.Events)
		}
		if want := "Warning RuntimeClass " + msg; !slices.Contains(events, want) {
			t.Errorf("no event %q in %q", want, events)
		}
	})
}
