package pleg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// logSink records the messages of a logger, for tests of what is logged
// and how often.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		s.msgs = append(s.msgs, args)
		s.mu.Unlock()
	}, funcr.Options{Verbosity: 0})
}

// count returns how many logged lines contain substr.
func (s *logSink) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

// eventedFixture is a runtimetest.Runtime with an Evented PLEG running on
// it, reading statuses through podruntime.Manager. Create it inside a
// synctest bubble.
type eventedFixture struct {
	*fixture
	e      *Evented
	logs   *logSink
	cancel context.CancelFunc
	done   chan error
}

// newStreamingFixture is newEventedFixture once its stream settled: the
// PLEG streams, or the test fails.
func newStreamingFixture(t *testing.T, opts EventedOptions) *eventedFixture {
	t.Helper()
	f := newEventedFixture(t, opts, nil)
	time.Sleep(streamSettle)
	synctest.Wait()
	if !f.e.Streaming() {
		t.Fatal("not Streaming once the stream settled")
	}
	return f
}

func newEventedFixture(t *testing.T, opts EventedOptions, setup func(*runtimetest.Runtime)) *eventedFixture {
	t.Helper()
	return newEventedFixtureReading(t, opts, setup, false)
}

// newEventedFixtureReading is newEventedFixture; with readsOnly, the PLEG's
// StatusGetter only reads pods (no PodStatusFromEvent), so that every
// event not already seen costs a read.
func newEventedFixtureReading(t *testing.T, opts EventedOptions, setup func(*runtimetest.Runtime), readsOnly bool) *eventedFixture {
	t.Helper()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	if setup != nil {
		setup(rt)
	}
	mgr, err := podruntime.New(rt, rt, podruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logs.logger()
	}
	cache := NewCache()
	var status StatusGetter = mgr
	if readsOnly {
		status = StatusGetterFunc(mgr.GetPodStatus)
	}
	e, err := NewEvented(rt, status, cache, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	f := &eventedFixture{
		fixture: &fixture{t: t, rt: rt, cache: cache, g: e.g},
		e:       e, logs: logs, cancel: cancel, done: make(chan error, 1),
	}
	go func() { f.done <- e.Run(ctx) }()
	t.Cleanup(f.stop)
	return f
}

func (f *eventedFixture) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	if err := <-f.done; err != nil {
		f.t.Errorf("Run = %v, want nil", err)
	}
}

// events returns the events sent so far, after the bubble settled.
func (f *eventedFixture) events() []Event {
	synctest.Wait()
	return drain(f.e.Events())
}

func TestEventedStreamsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, nil)
		synctest.Wait()
		if f.e.Streaming() {
			t.Error("Streaming before the stream settled")
		}
		time.Sleep(streamSettle)
		synctest.Wait()
		if !f.e.Streaming() {
			t.Fatal("not Streaming once the stream settled")
		}
		if n := f.logs.count("container event stream works"); n != 1 {
			t.Errorf("%d 'stream works' lines, want 1", n)
		}
		lastRelist := f.e.g.relistTime.Load()

		// Every change is seen at once, with no time passing: only the
		// stream can have delivered it (the relist period is 5 minutes).
		start := time.Now()
		sb := f.runSandbox("a")
		c1 := f.createContainer("a", sb, "app", true, "sleep", "infinity")
		want := []Event{
			{ID: "a", Type: ContainerStarted, Data: sb},
			{ID: "a", Type: ContainerStarted, Data: c1},
		}
		if d := cmp.Diff(want, f.events()); d != "" {
			t.Errorf("events of a new pod (-want +got):\n%s", d)
		}
		if got := f.cachedStates("a"); got[c1] != runtime.ContainerStateRunning {
			t.Errorf("cached states %v, want %s running", got, c1)
		}
		st, _ := f.cache.Get("a")
		if len(st.IPs) != 1 || st.Name != "pod-a" || st.Namespace != "ns" {
			t.Errorf("cached status %+v, want pod-a/ns with an IP", st)
		}

		if err := f.rt.ExitContainer(c1, 3, ""); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]Event{{ID: "a", Type: ContainerDied, Data: c1}}, f.events()); d != "" {
			t.Errorf("events of a death (-want +got):\n%s", d)
		}
		if got := f.cachedStates("a"); got[c1] != runtime.ContainerStateExited {
			t.Errorf("cached states %v, want %s exited", got, c1)
		}
		if err := f.rt.RemoveContainer(t.Context(), c1); err != nil {
			t.Fatal(err)
		}
		want = []Event{{ID: "a", Type: ContainerDied, Data: c1}, {ID: "a", Type: ContainerRemoved, Data: c1}}
		if d := cmp.Diff(want, f.events()); d != "" {
			t.Errorf("events of a removal (-want +got):\n%s", d)
		}
		if err := f.rt.StopPodSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
		if err := f.rt.RemovePodSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
		want = []Event{
			{ID: "a", Type: ContainerDied, Data: sb},
			{ID: "a", Type: ContainerDied, Data: sb}, {ID: "a", Type: ContainerRemoved, Data: sb},
		}
		if d := cmp.Diff(want, f.events()); d != "" {
			t.Errorf("events of the sandbox's end (-want +got):\n%s", d)
		}
		if st, _ := f.cache.Get("a"); len(st.SandboxStatuses)+len(st.ContainerStatuses) != 0 {
			t.Errorf("cache still holds the removed pod: %+v", st)
		}
		if !time.Now().Equal(start) {
			t.Errorf("%v passed; the events should need none", time.Since(start))
		}
		if f.e.g.relistTime.Load() != lastRelist {
			t.Error("a relist ran; the events should come from the stream alone")
		}
		if f.e.StreamEvents() == 0 {
			t.Error("StreamEvents = 0")
		}

		// The safety-net relist runs every 5 minutes.
		before := f.rt.Calls("ListContainers")
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		if got := f.rt.Calls("ListContainers") - before; got != 1 {
			t.Errorf("%d relists in 5 minutes, want 1", got)
		}
		if err := f.e.Healthy(); err != nil {
			t.Errorf("Healthy = %v", err)
		}
	})
}

// TestEventedStreamsStatuses: StreamsStatuses is true once events came
// that carry their pods' statuses, stays so across a removal (whose
// DELETED events are always read), is false when the StatusGetter cannot
// build a status from an event, and once the stream ends.
func TestEventedStreamsStatuses(t *testing.T) {
	for _, readsOnly := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f := newEventedFixtureReading(t, EventedOptions{}, nil, readsOnly)
			time.Sleep(streamSettle)
			synctest.Wait()
			if !f.e.Streaming() || f.e.StreamsStatuses() {
				t.Fatalf("before any event: Streaming %v, StreamsStatuses %v; want true, false", f.e.Streaming(), f.e.StreamsStatuses())
			}
			sb := f.runSandbox("a")
			c1 := f.createContainer("a", sb, "app", true, "sleep", "infinity")
			f.events()
			if got := f.e.StreamsStatuses(); got == readsOnly {
				t.Errorf("reads only %v: StreamsStatuses %v after a start", readsOnly, got)
			}
			if err := f.rt.StopContainer(t.Context(), c1, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.rt.RemoveContainer(t.Context(), c1); err != nil {
				t.Fatal(err)
			}
			f.events()
			if got := f.e.StreamsStatuses(); got == readsOnly {
				t.Errorf("reads only %v: StreamsStatuses %v after a removal", readsOnly, got)
			}
			f.stop()
			if f.e.StreamsStatuses() {
				t.Error("StreamsStatuses true once stopped")
			}
		})
	}
}

// TestEventedStreamsStatusesAfterRead: events that come after the agent's
// own read of their pod (which the cache takes as current, so that the
// events are not turned into a status) still tell that they carry
// statuses, as containerd's events after a pod worker's read-back do.
func TestEventedStreamsStatusesAfterRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, nil)
		time.Sleep(streamSettle)
		synctest.Wait()
		read := &runtime.PodStatus{ID: "a", Name: "read"}
		f.cache.Set("a", read, nil, time.Now().Add(time.Hour))
		sb := f.runSandbox("a")
		f.createContainer("a", sb, "app", true, "sleep", "infinity")
		f.events()
		if st, _ := f.cache.Get("a"); st != read {
			t.Fatalf("cached %+v, want the read, newer than the events", st)
		}
		if !f.e.StreamsStatuses() {
			t.Error("StreamsStatuses false after events that carry statuses")
		}
	})
}

// TestEventedCacheRefresh: while streaming, the cache is declared current
// every 2 s, so a pod worker waiting for a status newer than its last sync
// is released without a relist.
func TestEventedCacheRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, nil)
		time.Sleep(streamSettle)
		synctest.Wait()
		lastSync := time.Now()
		got := make(chan time.Time, 1)
		go func() {
			_, _ = f.cache.GetNewerThan(t.Context(), "quiet-pod", lastSync)
			got <- time.Now()
		}()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		select {
		case at := <-got:
			if d := at.Sub(lastSync); d > 2*time.Second {
				t.Errorf("released after %v, want within 2s", d)
			}
		default:
			t.Fatal("GetNewerThan still waiting after 3s of streaming")
		}
	})
}

func TestEventedFallbackUnimplemented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, func(rt *runtimetest.Runtime) {
			rt.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "no events in this runtime"))
		})
		synctest.Wait()
		if n := f.logs.count("does not stream container events"); n != 1 {
			t.Errorf("%d fallback lines at once, want 1", n)
		}
		// Relisting every second finds changes.
		sb := f.runSandbox("a")
		time.Sleep(time.Second)
		if d := cmp.Diff([]Event{{ID: "a", Type: ContainerStarted, Data: sb}}, f.events()); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
		before := f.rt.Calls("ListContainers")
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if got := f.rt.Calls("ListContainers") - before; got < 85 || got > 95 {
			t.Errorf("%d relists in 90s of fall-back, want about 90", got)
		}
		// Asked again every 30 s, logged once.
		if got := f.rt.Calls("GetContainerEvents"); got != 4 {
			t.Errorf("%d stream attempts in 91s, want 4 (at 0, 30, 60, 90s)", got)
		}
		if n := f.logs.count("does not stream container events"); n != 1 {
			t.Errorf("%d fallback lines, want 1", n)
		}
		if f.e.Streaming() {
			t.Error("Streaming on a runtime without events")
		}
		if err := f.e.Healthy(); err != nil {
			t.Errorf("Healthy while relisting = %v", err)
		}

		// The runtime gains events (say it was upgraded): back to events.
		f.rt.InjectError("GetContainerEvents", nil)
		time.Sleep(30*time.Second + streamSettle)
		synctest.Wait()
		if !f.e.Streaming() {
			t.Fatal("not Streaming 31s after the runtime serves events")
		}
		if n := f.logs.count("container event stream works"); n != 1 {
			t.Errorf("%d 'stream works' lines, want 1", n)
		}
		before = f.rt.Calls("ListContainers")
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.rt.Calls("ListContainers") - before; got != 0 {
			t.Errorf("%d relists in a minute of streaming, want 0", got)
		}
	})
}

// TestEventedStreamFailures: a stream that fails MaxStreamRetries times in
// a row makes Evented relist every second, logged once; the stream is
// retried with a back-off and, once it works, events drive the PLEG again.
func TestEventedStreamFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, func(rt *runtimetest.Runtime) {
			rt.InjectError("GetContainerEvents", status.Error(codes.Internal, "stream broken"))
		})
		// Failures at 0, 0.1, 0.3, 0.7, 1.5s: the fifth is the fall-back.
		time.Sleep(1400 * time.Millisecond)
		synctest.Wait()
		if n := f.logs.count("keeps failing"); n != 0 {
			t.Errorf("fell back after %d attempts, want 5", f.rt.Calls("GetContainerEvents"))
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if got := f.rt.Calls("GetContainerEvents"); got != 5 {
			t.Errorf("%d attempts after 1.6s, want 5", got)
		}
		if n := f.logs.count("keeps failing"); n != 1 {
			t.Errorf("%d fall-back lines, want 1", n)
		}
		// Back-off: attempts at 3.1, 6.3, 12.7, 25.5, 51.1, 81.1, 111.1 s
		// (waits of 1.6, 3.2, 6.4, 12.8, 25.6, then 30 s).
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := f.rt.Calls("GetContainerEvents"); got != 12 {
			t.Errorf("%d attempts after 121.6s, want 12 (back-off to 30s)", got)
		}
		if n := f.logs.count("keeps failing"); n != 1 {
			t.Errorf("%d fall-back lines, want 1", n)
		}
		sb := f.runSandbox("a")
		time.Sleep(time.Second)
		if d := cmp.Diff([]Event{{ID: "a", Type: ContainerStarted, Data: sb}}, f.events()); d != "" {
			t.Errorf("events while relisting (-want +got):\n%s", d)
		}

		f.rt.InjectError("GetContainerEvents", nil)
		time.Sleep(30*time.Second + streamSettle)
		synctest.Wait()
		if !f.e.Streaming() {
			t.Fatal("not Streaming after the stream recovered")
		}

		// A working stream that ends is retried at once, relisting
		// meanwhile; it is not a fall-back yet.
		before := f.rt.Calls("ListContainers")
		f.rt.InjectErrorOnce("GetContainerEvents", status.Error(codes.Internal, "once"))
		f.rt.SetDown(true) // ends the open stream; every call fails
		synctest.Wait()
		f.rt.SetDown(false)
		if f.e.Streaming() {
			t.Error("Streaming after the stream ended")
		}
		if n := f.logs.count("container event stream lost"); n != 1 {
			t.Errorf("%d 'stream lost' lines, want 1", n)
		}
		time.Sleep(time.Second + streamSettle)
		synctest.Wait()
		if !f.e.Streaming() {
			t.Error("not Streaming again after a one-off failure")
		}
		if got := f.rt.Calls("ListContainers") - before; got < 2 {
			t.Errorf("%d relists around the lost stream, want at least 2 (at once, and once it was back)", got)
		}
		if n := f.logs.count("keeps failing"); n != 1 {
			t.Errorf("%d fall-back lines, want still 1", n)
		}
	})
}

func TestEventedHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		e, err := NewEvented(rt, nopStatus, NewCache(), EventedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if e.Healthy() == nil {
			t.Error("Healthy before Run = nil, want an error")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		defer func() { cancel(); <-done }()
		time.Sleep(streamSettle)
		synctest.Wait()
		if err := e.Healthy(); err != nil {
			t.Errorf("Healthy while streaming = %v", err)
		}
		// Streaming, quiet, relists fail: healthy for 10 minutes.
		rt.InjectError("ListPodSandbox", errors.New("broken"))
		time.Sleep(9 * time.Minute)
		synctest.Wait()
		if err := e.Healthy(); err != nil {
			t.Errorf("Healthy after 9 quiet minutes of streaming = %v", err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if e.Healthy() == nil {
			t.Error("Healthy after 11 minutes without relist or event = nil, want an error")
		}
		rt.InjectError("ListPodSandbox", nil)
		// The runtime goes down: no stream, no relist; 3 minutes later
		// Evented is unhealthy.
		rt.SetDown(true)
		synctest.Wait()
		if err := e.Healthy(); err != nil {
			t.Errorf("Healthy right after the stream was lost = %v", err)
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if e.Healthy() == nil {
			t.Error("Healthy after 3 minutes with the runtime down = nil, want an error")
		}
		rt.SetDown(false)
		time.Sleep(time.Second)
		synctest.Wait()
		if err := e.Healthy(); err != nil {
			t.Errorf("Healthy once relists work again = %v", err)
		}
	})
}

// TestEventedFullChannel: events the channel cannot take are counted and
// made good by a PodSync once there is room.
func TestEventedFullChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{ChannelCapacity: 1}, nil)
		time.Sleep(streamSettle)
		synctest.Wait()
		sb := f.runSandbox("a")
		synctest.Wait()
		// The sandbox's start filled the channel; its container's start
		// finds it full.
		c := f.createContainer("a", sb, "app", true, "sleep", "infinity")
		synctest.Wait()
		if f.e.DroppedEvents() == 0 {
			t.Fatal("no drop counted")
		}
		if n := f.logs.count("event channel full"); n == 0 {
			t.Error("drop not logged")
		}
		if d := cmp.Diff([]Event{{ID: "a", Type: ContainerStarted, Data: sb}}, f.events()); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
		time.Sleep(time.Second)
		if d := cmp.Diff([]Event{{ID: "a", Type: PodSync}}, f.events()); d != "" {
			t.Errorf("events after the retry (-want +got):\n%s", d)
		}
		if got := f.cachedStates("a"); got[c] != runtime.ContainerStateRunning {
			t.Errorf("cached states %v, want %s running", got, c)
		}
	})
}

// TestEventedInspectFailure: a status that cannot be read is recorded as
// the pod's error in the cache, read again every second, and the pod then
// gets a PodSync.
func TestEventedInspectFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixtureReading(t, EventedOptions{}, nil, true)
		time.Sleep(streamSettle)
		synctest.Wait()
		f.rt.InjectError("PodSandboxStatus", status.Error(codes.Internal, "cannot read"))
		f.runSandbox("a")
		if got := f.events(); len(got) != 0 {
			t.Errorf("events for a pod whose status cannot be read: %v", got)
		}
		if _, err := f.cache.Get("a"); err == nil {
			t.Error("cache holds no error for the pod")
		}
		time.Sleep(time.Second)
		if got := f.events(); len(got) != 0 {
			t.Errorf("events while the status still cannot be read: %v", got)
		}
		f.rt.InjectError("PodSandboxStatus", nil)
		time.Sleep(time.Second)
		if d := cmp.Diff([]Event{{ID: "a", Type: PodSync}}, f.events()); d != "" {
			t.Errorf("events once the status is read (-want +got):\n%s", d)
		}
		if st, err := f.cache.Get("a"); err != nil || len(st.SandboxStatuses) != 1 {
			t.Errorf("cache = %+v, %v; want the pod's sandbox", st, err)
		}
	})
}

// TestEventedSkipsReadOfCurrentPod: a pod whose cached status was read
// after its events happened (the agent read it back after changing it) is
// not read again, but its events are still sent; a pod whose status is
// older than its events is read, or, when the events carry the statuses of
// their sandbox (podruntime.Manager.PodStatusFromEvent), built from them.
func TestEventedSkipsReadOfCurrentPod(t *testing.T) {
	for _, readsOnly := range []bool{true, false} {
		t.Run(fmt.Sprintf("readsOnly=%v", readsOnly), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newEventedFixtureReading(t, EventedOptions{}, nil, readsOnly)
				time.Sleep(streamSettle)
				synctest.Wait()
				sb := f.runSandbox("a")
				c1 := f.createContainer("a", sb, "app", true, "sleep", "infinity")
				c2 := f.createContainer("a", sb, "side", true, "sleep", "infinity")
				f.events()
				st, err := f.cache.Get("a")
				if err != nil {
					t.Fatal(err)
				}

				// The agent read the pod after the next change: no read by
				// the PLEG.
				f.cache.Set("a", st, nil, time.Now().Add(time.Millisecond))
				before := f.rt.Calls("ListContainers")
				if err := f.rt.ExitContainer(c1, 1, ""); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff([]Event{{ID: "a", Type: ContainerDied, Data: c1}}, f.events()); d != "" {
					t.Errorf("events (-want +got):\n%s", d)
				}
				if got := f.rt.Calls("ListContainers") - before; got != 0 {
					t.Errorf("%d status reads of a pod read after its event, want 0", got)
				}

				// The cached status is older than the next change.
				time.Sleep(time.Second)
				if err := f.rt.ExitContainer(c2, 1, ""); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff([]Event{{ID: "a", Type: ContainerDied, Data: c2}}, f.events()); d != "" {
					t.Errorf("events (-want +got):\n%s", d)
				}
				want := 0
				if readsOnly {
					want = 1
				}
				if got := f.rt.Calls("ListContainers") - before; got != want {
					t.Errorf("%d status reads of a pod changed after its cached read, want %d", got, want)
				}
				if got := f.cachedStates("a"); got[c2] != runtime.ContainerStateExited || got[c1] != runtime.ContainerStateExited {
					t.Errorf("cached states %v, want %s and %s exited", got, c1, c2)
				}
			})
		})
	}
}

// TestEventedIgnoresForeignObjects: objects without a pod UID are not
// nodekit's.
func TestEventedIgnoresForeignObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, nil)
		time.Sleep(streamSettle)
		synctest.Wait()
		if _, err := f.rt.RunPodSandbox(t.Context(), &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "foreign", Namespace: "x"},
		}, ""); err != nil {
			t.Fatal(err)
		}
		if got := f.events(); len(got) != 0 {
			t.Errorf("events for a foreign sandbox: %v", got)
		}
	})
}

func TestPodOf(t *testing.T) {
	tests := []struct {
		name string
		ev   *runtimeapi.ContainerEventResponse
		want [3]string
	}{
		{"label", &runtimeapi.ContainerEventResponse{PodSandboxStatus: &runtimeapi.PodSandboxStatus{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "n", Namespace: "ns", Uid: "meta"},
			Labels:   map[string]string{runtime.LabelPodUID: "label"},
		}}, [3]string{"label", "n", "ns"}},
		{"metadata", &runtimeapi.ContainerEventResponse{PodSandboxStatus: &runtimeapi.PodSandboxStatus{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "n", Namespace: "ns", Uid: "meta"},
		}}, [3]string{"meta", "n", "ns"}},
		{"container labels", &runtimeapi.ContainerEventResponse{ContainerId: "c", ContainersStatuses: []*runtimeapi.ContainerStatus{
			{Id: "other", Labels: map[string]string{runtime.LabelPodUID: "wrong"}},
			{Id: "c", Labels: map[string]string{runtime.LabelPodUID: "u", runtime.LabelPodName: "n", runtime.LabelPodNamespace: "ns"}},
		}}, [3]string{"u", "n", "ns"}},
		{"nothing", &runtimeapi.ContainerEventResponse{ContainerId: "c"}, [3]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uid, name, ns := podOf(tc.ev)
			if d := cmp.Diff(tc.want, [3]string{string(uid), name, ns}); d != "" {
				t.Errorf("podOf (-want +got):\n%s", d)
			}
		})
	}
}

// listerOnly hides every method but the Lister's.
type listerOnly struct{ Lister }

func TestNewAuto(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	tests := []struct {
		name    string
		rt      Lister
		opts    EventedOptions
		want    string
		wantErr string
	}{
		{name: "event streamer", rt: rt, want: "*pleg.Evented"},
		{name: "lister only", rt: listerOnly{rt}, want: "*pleg.Generic"},
		{name: "bad options, streamer", rt: rt, opts: EventedOptions{MaxStreamRetries: -1}, wantErr: "MaxStreamRetries"},
		{name: "bad options, lister", rt: listerOnly{rt}, opts: EventedOptions{RelistPeriod: -time.Second}, wantErr: "RelistPeriod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewAuto(tc.rt, nopStatus, NewCache(), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("NewAuto = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", g); got != tc.want {
				t.Errorf("NewAuto returned %s, want %s", got, tc.want)
			}
		})
	}
	// The Generic of a lister relists at the Evented fall-back period.
	g, _ := NewAuto(listerOnly{rt}, nopStatus, NewCache(), EventedOptions{RelistPeriod: 7 * time.Second})
	if got := g.(*Generic).opts.RelistPeriod; got != 7*time.Second {
		t.Errorf("Generic relist period %v, want 7s", got)
	}
}

func TestEventedOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    EventedOptions
		wantErr string
	}{
		{name: "zero"},
		{name: "negative period", opts: EventedOptions{EventedRelistPeriod: -1}, wantErr: "EventedRelistPeriod must be positive"},
		{name: "threshold below period", opts: EventedOptions{EventedRelistPeriod: time.Hour}, wantErr: "EventedRelistThreshold"},
		{name: "relist threshold", opts: EventedOptions{RelistPeriod: time.Hour}, wantErr: "RelistThreshold"},
		{name: "negative capacity", opts: EventedOptions{ChannelCapacity: -1}, wantErr: "ChannelCapacity"},
		{name: "negative retry", opts: EventedOptions{StreamRetryPeriod: -1}, wantErr: "StreamRetryPeriod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.withDefaults()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("withDefaults = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("withDefaults = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	o, _ := EventedOptions{}.withDefaults()
	want := EventedOptions{
		RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute,
		EventedRelistPeriod: 5 * time.Minute, EventedRelistThreshold: 10 * time.Minute,
		MaxStreamRetries: 5, StreamRetryPeriod: 30 * time.Second, CacheRefreshPeriod: 2 * time.Second,
		ChannelCapacity: 1000,
	}
	if d := cmp.Diff(want, o, cmp.Comparer(func(a, b logr.Logger) bool { return true })); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	if _, err := NewEvented(nil, nopStatus, NewCache(), EventedOptions{}); err == nil {
		t.Error("NewEvented(nil runtime) succeeded")
	}
	if _, err := NewEvented(rt, nil, NewCache(), EventedOptions{}); err == nil {
		t.Error("NewEvented(nil status) succeeded")
	}
}

func TestEventedRunTwice(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, nil)
		synctest.Wait()
		if err := f.e.Run(t.Context()); err == nil {
			t.Error("a second concurrent Run succeeded")
		}
		f.stop()
		// Run may be called again once it returned.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := f.e.Run(ctx); err != nil {
			t.Errorf("Run after the first returned = %v", err)
		}
	})
}

// BenchmarkDeathDetection measures how long a container death takes to
// reach the Events channel on the in-memory runtime: through the event
// stream (Evented) and by relisting (Generic, every second). Each
// iteration starts a container, kills it, and waits for its
// ContainerDied; the death comes at a random time within a relist period.
// The figures are the mean and the worst latency; ns/op includes the
// random wait.
func BenchmarkDeathDetection(b *testing.B) {
	for _, mode := range []string{"evented", "relist"} {
		b.Run(mode, func(b *testing.B) {
			rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
			b.Cleanup(rt.Close)
			mgr, err := podruntime.New(rt, rt, podruntime.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var gen EventGenerator
			var e *Evented
			if mode == "evented" {
				e, err = NewEvented(rt, mgr, NewCache(), EventedOptions{})
				gen = e
			} else {
				gen, err = NewGeneric(rt, mgr, NewCache(), GenericOptions{})
			}
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- gen.Run(ctx) }()
			defer func() { cancel(); <-done }()
			if e != nil {
				for !e.Streaming() {
					time.Sleep(10 * time.Millisecond)
				}
			}
			sb, err := rt.RunPodSandbox(ctx, podConfig("a"), "")
			if err != nil {
				b.Fatal(err)
			}
			var total, worst time.Duration
			n := 0
			for b.Loop() {
				id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
					Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprint("c", n)},
					Image:    &runtimeapi.ImageSpec{Image: "busybox"},
					Labels:   map[string]string{runtime.LabelPodUID: "a", runtime.LabelContainerName: fmt.Sprint("c", n)},
				}, podConfig("a"))
				if err == nil {
					err = rt.StartContainer(ctx, id)
				}
				if err != nil {
					b.Fatal(err)
				}
				// Die at a random phase of the relist period.
				time.Sleep(rand.N(time.Second))
				start := time.Now()
				if err := rt.ExitContainer(id, 1, ""); err != nil {
					b.Fatal(err)
				}
				for ev := range gen.Events() {
					if ev.Type == ContainerDied && ev.Data == id {
						break
					}
				}
				d := time.Since(start)
				total += d
				worst = max(worst, d)
				n++
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "latency-ms/death")
			b.ReportMetric(float64(worst.Microseconds())/1000, "max-latency-ms")
		})
	}
}

// TestEventedRelistAfterLostStream loses the stream after it delivered
// pods' changes: the relist that takes over sends the events of the pods
// with changes the stream missed, and none for a pod whose changes it
// sent.
func TestEventedRelistAfterLostStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStreamingFixture(t, EventedOptions{})
		sbA := f.runSandbox("a")
		cA := f.createContainer("a", sbA, "app", true, "sleep", "infinity")
		sbC := f.runSandbox("c")
		cC := f.createContainer("c", sbC, "app", true, "sleep", "infinity")
		want := []Event{
			{ID: "a", Type: ContainerStarted, Data: sbA},
			{ID: "a", Type: ContainerStarted, Data: cA},
			{ID: "c", Type: ContainerStarted, Data: sbC},
			{ID: "c", Type: ContainerStarted, Data: cC},
		}
		if d := cmp.Diff(want, f.events()); d != "" {
			t.Fatalf("events from the stream (-want +got):\n%s", d)
		}

		// The stream ends; pod b starts and pod c's container exits
		// before a new stream opens.
		f.rt.SetDown(true)
		synctest.Wait()
		f.rt.SetDown(false)
		if f.e.Streaming() {
			t.Fatal("Streaming after the stream ended")
		}
		sbB := f.runSandbox("b")
		if err := f.rt.StopContainer(t.Context(), cC, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second + streamSettle)
		synctest.Wait()
		if !f.e.Streaming() {
			t.Fatal("not Streaming again")
		}
		byPod := map[string][]Event{}
		for _, ev := range f.events() {
			byPod[string(ev.ID)] = append(byPod[string(ev.ID)], ev)
		}
		if len(byPod["a"]) != 0 {
			t.Errorf("events of pod a, whose changes the stream sent: %v, want none", byPod["a"])
		}
		if d := cmp.Diff([]Event{{ID: "b", Type: ContainerStarted, Data: sbB}}, byPod["b"]); d != "" {
			t.Errorf("events of pod b, started while the stream was lost (-want +got):\n%s", d)
		}
		if !slices.Contains(byPod["c"], Event{ID: "c", Type: ContainerDied, Data: cC}) {
			t.Errorf("events of pod c %v, want its container's death", byPod["c"])
		}
		f.e.wmu.Lock()
		left := len(f.e.witnessed)
		f.e.wmu.Unlock()
		if left != 0 {
			t.Errorf("%d witnessed states kept after the relists, want 0", left)
		}
	})
}

// TestEventedFullChannelLogsOnceAMinute: a consumer that does not keep up
// with the event stream for 150 s gets the full channel logged once, then
// once a minute with the count of the lines not logged, not once per batch.
func TestEventedFullChannelLogsOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{ChannelCapacity: 1}, nil)
		time.Sleep(streamSettle)
		synctest.Wait()
		f.runSandbox("first") // fills the channel; nobody reads it
		synctest.Wait()
		for i := range 150 {
			sb := f.runSandbox(fmt.Sprintf("p%d", i))
			synctest.Wait()
			f.createContainer(fmt.Sprintf("p%d", i), sb, "app", true, "sleep", "infinity")
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if d := f.e.DroppedEvents(); d < 150 {
			t.Fatalf("DroppedEvents = %d, want a drop for each new pod", d)
		}
		if n := f.logs.count("event channel full"); n < 1 || n > 3 {
			t.Errorf("%d lines of the full channel in 150 s of drops, want 1 to 3 (once, then once a minute)", n)
		}
	})
}

// TestEventedForgetsRemovedPods: once the stream shows a pod's last
// object deleted, the PLEG holds nothing of it: no cache entry, no record
// of the relist's tracker (from a relist that saw it), no witness of its
// containers' states; nothing waits for the next relist, minutes away.
func TestEventedForgetsRemovedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newEventedFixture(t, EventedOptions{}, nil)
		time.Sleep(streamSettle)
		synctest.Wait()
		sb := f.runSandbox("a")
		c := f.createContainer("a", sb, "app", true, "sleep", "infinity")
		f.events()
		// A relist sees the pod (as the safety net does every 5 minutes).
		if err := f.e.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		f.events()
		if err := f.rt.StopContainer(t.Context(), c, 0); err != nil {
			t.Fatal(err)
		}
		f.events()
		for _, step := range []func() error{
			func() error { return f.rt.RemoveContainer(t.Context(), c) },
			func() error { return f.rt.StopPodSandbox(t.Context(), sb) },
			func() error { return f.rt.RemovePodSandbox(t.Context(), sb) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
			f.events()
		}
		if _, ok := f.cache.ReadAt("a"); ok {
			t.Error("the cache still holds the pod")
		}
		f.e.g.mu.Lock()
		records := len(f.e.g.tracker.pods) + len(f.e.g.tracker.ctrs)
		f.e.g.mu.Unlock()
		f.e.wmu.Lock()
		witnessed := len(f.e.witnessed)
		f.e.wmu.Unlock()
		if records+witnessed != 0 {
			t.Errorf("after the pod's removal: %d records of the relist's tracker, %d witnesses; want none", records, witnessed)
		}
	})
}

// TestEventedPendingReleased checks that the pods the consumer owed a
// PodSync (the events channel was full, as under churn) are released once
// the syncs went out: the map that held them is not kept at the size of
// the burst.
func TestEventedPendingReleased(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	mgr, err := podruntime.New(rt, rt, podruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const pods = 10000
	e, err := NewEvented(rt, mgr, NewCache(), EventedOptions{ChannelCapacity: pods})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		e.owe(types.UID(fmt.Sprint("pod-", i)), "p", "ns").sync = true
	}
	burst := reflect.ValueOf(e.pending).UnsafePointer()
	e.retryPending(t.Context())
	if n := len(drain(e.Events())); n != pods {
		t.Fatalf("%d PodSyncs sent, want %d", n, pods)
	}
	if len(e.pending) != 0 {
		t.Fatalf("%d pods still owed", len(e.pending))
	}
	if reflect.ValueOf(e.pending).UnsafePointer() == burst {
		t.Error("the map of owed pods is the burst's: it keeps the room of 10,000 pods")
	}
}

// TestEventedIdleRefreshesNothing: with no reader waiting for a newer
// status, the streaming PLEG never declares its cache current (it wakes
// for nothing), and the cache is live meanwhile, current for its
// readers; a reader that waits is released at the instant of the
// 2 s grid a ticker would have, the same as before, and a second one
// later too.
func TestEventedIdleRefreshesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newStreamingFixture(t, EventedOptions{EventedRelistPeriod: time.Hour, EventedRelistThreshold: 2 * time.Hour})
		refreshed := func() time.Time {
			f.cache.mu.Lock()
			defer f.cache.mu.Unlock()
			return f.cache.refreshed
		}
		before := refreshed()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got := refreshed(); !got.Equal(before) {
			t.Fatalf("refreshed at %v with no reader waiting (was %v)", got.Sub(start), before.Sub(start))
		}
		if _, ok := f.cache.Changes(time.Now()); !ok {
			t.Fatal("the cache of a working stream is not current for its readers")
		}
		for i := range 2 {
			time.Sleep(700 * time.Millisecond)
			lastSync := time.Now()
			got := make(chan time.Time, 1)
			go func() {
				_, _ = f.cache.GetNewerThan(t.Context(), "quiet-pod", lastSync)
				got <- time.Now()
			}()
			time.Sleep(3 * time.Second)
			synctest.Wait()
			select {
			case at := <-got:
				// The ticker's instants: start + k*2s (the consumer
				// starts with the fixture, in the bubble's fake time).
				if off := at.Sub(start) % (2 * time.Second); off != 0 || at.Sub(lastSync) > 2*time.Second {
					t.Errorf("reader %d released %v after it waited, %v off the 2s grid", i, at.Sub(lastSync), off)
				}
			default:
				t.Fatalf("reader %d still waiting after 3s of streaming", i)
			}
		}
	})
}

// TestEventedGoroutines: a running Evented holds two goroutines, its
// consumer (which relists too) and the stream's.
func TestEventedGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStreamingFixture(t, EventedOptions{})
		var buf bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
			t.Fatal(err)
		}
		n := 0
		for g := range strings.SplitSeq(buf.String(), "\n\n") {
			if strings.Contains(g, "pleg.(*Evented).Run") {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%d goroutines of Run, want 2", n)
		}
		// A relist still comes at once when asked, and at its period.
		relists := func() uint64 {
			f.e.wmu.Lock()
			defer f.e.wmu.Unlock()
			return uint64(f.e.relists)
		}
		before := relists()
		f.e.relistNow()
		synctest.Wait()
		if relists() != before+1 {
			t.Error("no relist when asked")
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if relists() != before+2 {
			t.Errorf("%d relists in the evented period after one asked, want 1", relists()-before-1)
		}
	})
}
