package nodekit_test

import (
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
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
