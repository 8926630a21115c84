package cri_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

type eventView struct {
	ID   string
	Type runtimeapi.ContainerEventType
}

// TestEvents streams the events of a container's life through the client.
func TestEvents(t *testing.T) {
	c, rt := newClient(t, runtimetest.Options{Images: []string{"busybox"}})
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan *runtimeapi.ContainerEventResponse, 16)
	established := make(chan struct{})
	done := make(chan error, 1)
	calls := 0
	go func() {
		done <- c.GetContainerEvents(ctx, ch, func(s runtimeapi.RuntimeService_GetContainerEventsClient) {
			calls++
			if s == nil {
				t.Error("callback got a nil stream")
			}
			close(established)
		})
	}()
	select {
	case <-established:
	case err := <-done:
		t.Fatalf("GetContainerEvents returned before the stream was up: %v", err)
	}
	// The callback runs once the client sent its request; the server may
	// not have subscribed yet. Wait until it has.
	if err := rt.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	sc := sandboxConfig("p", "uid-e")
	sid, err := c.RunPodSandbox(ctx, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := c.CreateContainer(ctx, sid, containerConfig("c", "uid-e"), sc)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.StartContainer(ctx, cid)
	_ = rt.ExitContainer(cid, 2, "")
	_ = c.RemoveContainer(ctx, cid)

	want := []eventView{
		{sid, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{sid, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{cid, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{cid, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{cid, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{cid, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	var got []eventView
	var stopped *runtimeapi.ContainerEventResponse
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case ev := <-ch:
			got = append(got, eventView{ev.ContainerId, ev.ContainerEventType})
			if ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				stopped = ev
			}
		case err := <-done:
			t.Fatalf("stream ended early: %v", err)
		case <-timeout:
			t.Fatalf("timed out; events so far: %v", got)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		// The sandbox's events may come in a runtime-specific order;
		// runtimetest's is fixed.
		t.Errorf("events (-want +got):\n%s", d)
	}
	if stopped.GetPodSandboxStatus().GetId() != sid || len(stopped.ContainersStatuses) != 1 ||
		stopped.ContainersStatuses[0].ExitCode != 2 {
		t.Errorf("STOPPED event carries sandbox %q and statuses %v; want sandbox %s and exit code 2",
			stopped.GetPodSandboxStatus().GetId(), stopped.ContainersStatuses, sid)
	}

	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Errorf("GetContainerEvents after cancel = %v, want Canceled", err)
	}
	if calls != 1 {
		t.Errorf("callback called %d times, want 1", calls)
	}
}

func TestEventsErrors(t *testing.T) {
	t.Run("unimplemented", func(t *testing.T) {
		c, rt := newClient(t, runtimetest.Options{})
		rt.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "no events here"))
		err := c.GetContainerEvents(t.Context(), make(chan *runtimeapi.ContainerEventResponse), nil)
		if !errors.Is(err, runtime.ErrUnimplemented) || !runtime.IsUnimplemented(err) {
			t.Errorf("GetContainerEvents = %v, want ErrUnimplemented", err)
		}
	})
	t.Run("runtime goes down", func(t *testing.T) {
		c, rt := newClient(t, runtimetest.Options{})
		done := make(chan error, 1)
		go func() { done <- c.GetContainerEvents(t.Context(), make(chan *runtimeapi.ContainerEventResponse), nil) }()
		if err := rt.WaitSubscribers(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		rt.SetDown(true)
		select {
		case err := <-done:
			if !errors.Is(err, runtime.ErrUnavailable) {
				t.Errorf("GetContainerEvents = %v, want ErrUnavailable", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("GetContainerEvents did not return after the runtime went down")
		}
	})
	t.Run("blocked consumer and cancel", func(t *testing.T) {
		// Nobody reads the channel: cancelling ctx still ends the call.
		// The channel holds one event; a sandbox's start sends two, so
		// once the first is in, the client waits to send the second.
		c, rt := newClient(t, runtimetest.Options{Images: []string{"busybox"}})
		ctx, cancel := context.WithCancel(t.Context())
		ch := make(chan *runtimeapi.ContainerEventResponse, 1)
		done := make(chan error, 1)
		go func() { done <- c.GetContainerEvents(ctx, ch, nil) }()
		if err := rt.WaitSubscribers(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.RunPodSandbox(t.Context(), sandboxConfig("p", "u"), ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return len(ch) == 1 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("GetContainerEvents = %v, want Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("GetContainerEvents blocked on a full channel after cancel")
		}
	})
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEventedPLEGOverCRI runs the evented PLEG through the client: with a
// runtime that streams events it switches to them, and with one that
// answers Unimplemented (on the first receive, after the stream opened) it
// relists and says so once.
func TestEventedPLEGOverCRI(t *testing.T) {
	run := func(t *testing.T, setup func(*runtimetest.Runtime)) (*pleg.Evented, *runtimetest.Runtime, *lineCounter) {
		c, rt := newClient(t, runtimetest.Options{Images: []string{"busybox"}})
		setup(rt)
		mgr, err := podruntime.New(c, c, podruntime.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lines := &lineCounter{}
		e, err := pleg.NewEvented(c, mgr, pleg.NewCache(), pleg.EventedOptions{Logger: lines.logger()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
		return e, rt, lines
	}
	t.Run("streaming", func(t *testing.T) {
		e, rt, _ := run(t, func(*runtimetest.Runtime) {})
		waitFor(t, e.Streaming)
		sid, err := rt.RunPodSandbox(t.Context(), sandboxConfig("p", "uid-p"), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StopPodSandbox(t.Context(), sid); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-e.Events():
				if ev.Type == pleg.ContainerDied && ev.Data == sid {
					return
				}
			case <-timeout:
				t.Fatal("no ContainerDied for the stopped sandbox")
			}
		}
	})
	t.Run("unimplemented", func(t *testing.T) {
		e, rt, lines := run(t, func(rt *runtimetest.Runtime) {
			rt.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "unknown method GetContainerEvents"))
		})
		waitFor(t, func() bool { return lines.count("does not stream container events") == 1 })
		time.Sleep(1500 * time.Millisecond) // past the settle time
		if e.Streaming() {
			t.Error("Streaming on a runtime without events")
		}
		if n := rt.Calls("GetContainerEvents"); n != 1 {
			t.Errorf("%d stream attempts in 1.5s, want 1 (the next in 30s)", n)
		}
		if n := lines.count("does not stream container events"); n != 1 {
			t.Errorf("fall-back logged %d times, want once", n)
		}
		if err := e.Healthy(); err != nil {
			t.Errorf("Healthy while relisting = %v", err)
		}
	})
}

// lineCounter records log lines.
type lineCounter struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineCounter) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

func (l *lineCounter) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}
