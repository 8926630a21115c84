package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodekit/nodekit"
)

// TestRuntimeClassOnContainerd: with RuntimeClasses given to a standalone
// agent, a pod whose class's handler is "runc" (containerd's default
// runtime name) runs with that handler; a pod whose class names a handler
// containerd does not know fails its sandbox with containerd's error in a
// FailedCreatePodSandBox event.
func TestRuntimeClassOnContainerd(t *testing.T) {
	f := newFixture(t, envEndpoint)
	ev := &events{}
	classes := map[string]string{"runc-class": "runc", "unknown-class": "no-such-handler"}
	a := f.agentWith(nil, "runtimeclass", func(o *nodekit.Options) {
		o.Events = ev
		o.RuntimeClasses = nodekit.RuntimeClassGetterFunc(func(name string) (*nodev1.RuntimeClass, error) {
			if h, ok := classes[name]; ok {
				return &nodev1.RuntimeClass{Handler: h}, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclass"}, name)
		})
	})
	pod := func(name, class string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  terminationGracePeriodSeconds: 1
  runtimeClassName: %s
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, name, f.ns, class, busyboxImage)
	}
	writeManifest(t, f.dir, "runc.yaml", pod("runc", "runc-class"))
	writeManifest(t, f.dir, "unknown.yaml", pod("unknown", "unknown-class"))
	runc, unknown := f.pod("runc"), f.pod("unknown")

	eventually(t, time.Minute, "the runc class's pod running", func() bool { return a.running(runc) })
	sbs, _ := podObjects(t, f.cri, a.podUID(runc))
	if len(sbs) != 1 {
		t.Fatalf("%d sandboxes of the runc class's pod, want 1", len(sbs))
	}
	st, err := f.cri.PodSandboxStatus(t.Context(), sbs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if h := st.GetStatus().GetRuntimeHandler(); h != "runc" {
		t.Errorf("sandbox runtime handler %q, want runc", h)
	}

	want := `no runtime for "no-such-handler" is configured`
	eventually(t, time.Minute, "the unknown handler's sandbox failing with containerd's error", func() bool {
		for _, e := range ev.all() {
			if strings.HasPrefix(e, "Warning FailedCreatePodSandBox Failed to create pod sandbox: ") && strings.Contains(e, want) {
				return true
			}
		}
		return false
	})
	if sbs, cs := podObjects(t, f.cri, a.podUID(unknown)); len(sbs) != 0 || len(cs) != 0 {
		t.Errorf("the unknown handler's pod in containerd: %d sandboxes, %d containers", len(sbs), len(cs))
	}
}

// TestRuntimeClassTwoHandlers: on a containerd with two runtime handlers
// (runc and runc-b, as hack/containerd.sh configures every instance), two
// pods of two RuntimeClasses each run on their class's handler, as CRI
// PodSandboxStatus reports it. A class naming a handler containerd does
// not have is rejected at admission (Failed, reason RuntimeClass) by
// containerd 2.x, which lists its handlers in its CRI Status; containerd
// 1.6 lists none, and the pod's sandbox fails with containerd's error.
func TestRuntimeClassTwoHandlers(t *testing.T) {
	for _, v := range []struct{ name, env string }{{"containerd-1.6", envEndpoint}, {"containerd-2", envEndpoint2}} {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.env)
			st, err := f.cri.Status(t.Context(), false)
			if err != nil {
				t.Fatal(err)
			}
			listsHandlers := len(st.GetRuntimeHandlers()) > 0
			var names []string
			for _, h := range st.GetRuntimeHandlers() {
				names = append(names, fmt.Sprintf("%q", h.GetName()))
			}
			t.Logf("runtime handlers in the CRI Status: %v", names)
			ev := &events{}
			classes := map[string]string{"class-a": "runc", "class-b": "runc-b", "class-unknown": "no-such-handler"}
			a := f.agentWith(nil, "runtimeclass-two", func(o *nodekit.Options) {
				o.Events = ev
				o.RuntimeClasses = nodekit.RuntimeClassGetterFunc(func(name string) (*nodev1.RuntimeClass, error) {
					if h, ok := classes[name]; ok {
						return &nodev1.RuntimeClass{Handler: h}, nil
					}
					return nil, apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
				})
			})
			pod := func(name, class string) string {
				return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  terminationGracePeriodSeconds: 1
  runtimeClassName: %s
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, name, f.ns, class, busyboxImage)
			}
			// The unknown class's pod after the runtime's first Status.
			eventually(t, time.Minute, "the runtime checked", func() bool { return a.agent.Healthy() == nil })
			writeManifest(t, f.dir, "a.yaml", pod("pod-a", "class-a"))
			writeManifest(t, f.dir, "b.yaml", pod("pod-b", "class-b"))
			writeManifest(t, f.dir, "unknown.yaml", pod("pod-unknown", "class-unknown"))
			for name, want := range map[string]string{"pod-a": "runc", "pod-b": "runc-b"} {
				full := f.pod(name)
				eventually(t, time.Minute, name+" running", func() bool { return a.running(full) })
				sbs, _ := podObjects(t, f.cri, a.podUID(full))
				if len(sbs) != 1 {
					t.Fatalf("%d sandboxes of %s, want 1", len(sbs), name)
				}
				st, err := f.cri.PodSandboxStatus(t.Context(), sbs[0].Id, false)
				if err != nil {
					t.Fatal(err)
				}
				if h := st.GetStatus().GetRuntimeHandler(); h != want {
					t.Errorf("%s: sandbox runtime handler %q, want %q", name, h, want)
				}
			}
			unknown := f.pod("pod-unknown")
			if listsHandlers {
				msg := `Pod was rejected: RuntimeClass "class-unknown" names the runtime handler "no-such-handler", which this node does not offer`
				eventually(t, time.Minute, "the unknown handler's pod rejected", func() bool {
					s, _ := a.status(unknown)
					return s.Phase == "Failed" && s.Reason == "RuntimeClass" && s.Message == msg
				})
			} else {
				want := `no runtime for "no-such-handler" is configured`
				eventually(t, time.Minute, "the unknown handler's sandbox failing with containerd's error", func() bool {
					for _, e := range ev.all() {
						if strings.HasPrefix(e, "Warning FailedCreatePodSandBox ") && strings.Contains(e, want) {
							return true
						}
					}
					return false
				})
			}
			if sbs, cs := podObjects(t, f.cri, a.podUID(unknown)); len(sbs) != 0 || len(cs) != 0 {
				t.Errorf("the unknown handler's pod in containerd: %d sandboxes, %d containers", len(sbs), len(cs))
			}
		})
	}
}
