package runtime_test

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestWithIdentity(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	a := runtime.WithIdentity(rt, "a")
	b := runtime.WithIdentity(rt, "b")
	if _, ok := a.(runtime.ContainerEventStreamer); !ok {
		t.Fatal("scoping hid the event stream")
	}
	if _, ok := a.(runtime.ImageService); !ok {
		t.Fatal("scoping hid the image service")
	}
	if again := runtime.WithIdentity(a, "c"); again != a {
		t.Error("a scoped runtime was scoped again")
	}
	if got := a.(runtime.Scoped).Identity(); got != "a" {
		t.Errorf("Identity() = %q", got)
	}
	ctx := t.Context()

	// b's event stream, to check that it hears nothing of a's pods.
	events := make(chan *runtimeapi.ContainerEventResponse, 100)
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	established := make(chan struct{})
	go func() {
		done <- b.(runtime.ContainerEventStreamer).GetContainerEvents(ectx, events, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established

	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u1", Namespace: "default"}, Labels: map[string]string{"x": "1"}}
	sa, err := a.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Labels) != 1 {
		t.Errorf("the caller's config was changed: %v", cfg.Labels)
	}
	ca, err := a.CreateContainer(ctx, sa, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "q", Uid: "u2", Namespace: "default"}}, "")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		rs   runtime.RuntimeService
		want string
	}{{a, sa}, {b, sb}} {
		list, err := tc.rs.ListPodSandbox(ctx, nil)
		if err != nil || len(list) != 1 || list[0].Id != tc.want {
			t.Errorf("%s: ListPodSandbox = %v, %v; want only %s", tc.rs.(runtime.Scoped).Identity(), list, err, tc.want)
		}
	}
	if list, _ := a.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"x": "1"}}); len(list) != 1 {
		t.Errorf("a's selector x=1 found %d sandboxes, want 1", len(list))
	}
	if cs, _ := b.ListContainers(ctx, nil); len(cs) != 0 {
		t.Errorf("b lists a's containers: %v", cs)
	}
	if cs, _ := a.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sa}); len(cs) != 1 || cs[0].Id != ca || cs[0].Labels[runtime.LabelAgent] != "a" {
		t.Errorf("a's containers = %v, want %s labelled a", cs, ca)
	}
	if all, _ := rt.ListPodSandbox(ctx, nil); len(all) != 2 {
		t.Errorf("the runtime itself has %d sandboxes, want 2", len(all))
	}

	// b heard of its own sandbox (created, started) and nothing of a's.
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-events:
			got = append(got, ev.ContainerId)
		case <-timeout:
			t.Fatalf("b's events: %v, want two of sandbox %s", got, sb)
		}
	}
	cancel()
	<-done
	for _, id := range got {
		if id != sb {
			t.Errorf("b heard of %s, not its own", id)
		}
	}
	select {
	case ev := <-events:
		t.Errorf("b heard of %s", ev.ContainerId)
	default:
	}
}
