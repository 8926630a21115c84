package runtime_test

import (
	"context"
	goruntime "runtime"
	"strings"
	"testing"
	"testing/synctest"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// eventsOnly hides the FilteredEventStreamer of the streamer it holds.
type eventsOnly struct {
	runtime.RuntimeService
	runtime.ContainerEventStreamer
}

// A scoped runtime's event stream leaves out the other identities'
// events whether the streamer it scopes filters itself
// (FilteredEventStreamer: no goroutine beyond the caller's) or not (a
// goroutine of the scope's own filters).
func TestScopedEventsFiltered(t *testing.T) {
	for _, filtered := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) { testScopedEvents(t, filtered) })
	}
}

func testScopedEvents(t *testing.T, filtered bool) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	var under runtime.RuntimeService = rt
	if !filtered {
		under = eventsOnly{RuntimeService: rt, ContainerEventStreamer: rt}
	}
	a, b := runtime.WithIdentity(under, "a"), runtime.WithIdentity(under, "b")
	ctx := t.Context()
	events, stop := streamEvents(t, b)
	synctest.Wait()
	want := 1
	if !filtered {
		want = 2
	}
	if got := streamGoroutines(); got != want {
		t.Errorf("filtered %v: the stream runs %d goroutines, want %d", filtered, got, want)
	}
	if _, err := a.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u1", Namespace: "default"}}, ""); err != nil {
		t.Fatal(err)
	}
	sb, err := b.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "q", Uid: "u2", Namespace: "default"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	stop()
	var got []string
	for len(events) > 0 {
		got = append(got, (<-events).ContainerId)
	}
	// b heard of its own sandbox (created, started), nothing of a's.
	if len(got) != 2 || got[0] != sb || got[1] != sb {
		t.Errorf("filtered %v: b heard of %v, want sandbox %s twice", filtered, got, sb)
	}
}

// streamGoroutines counts the goroutines running a scoped stream or the
// in-memory runtime's, whatever else the process runs.
func streamGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "nodekit/runtime.scopedEvents.") || strings.Contains(g, "nodekit/runtime/runtimetest.(*Runtime).GetContainerEvents") {
			n++
		}
	}
	return n
}

// streamEvents streams rt's container events into the returned channel
// (room for 100), once the stream is established; stop ends it.
func streamEvents(t *testing.T, rt runtime.RuntimeService) (events chan *runtimeapi.ContainerEventResponse, stop func()) {
	t.Helper()
	events = make(chan *runtimeapi.ContainerEventResponse, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	established := make(chan struct{})
	go func() {
		done <- rt.(runtime.ContainerEventStreamer).GetContainerEvents(ctx, events, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established
	return events, func() { cancel(); <-done }
}
