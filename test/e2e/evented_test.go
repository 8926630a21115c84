package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// seenEvent is a PLEG event and when the agent got it.
type seenEvent struct {
	ev *pleg.Event
	at time.Time
}

// teePLEG passes a PLEG's events on to the agent and notes when each came.
type teePLEG struct {
	pleg.EventGenerator
	out chan *pleg.Event

	mu   sync.Mutex
	seen []seenEvent
}

func newTee(g pleg.EventGenerator) *teePLEG {
	return &teePLEG{EventGenerator: g, out: make(chan *pleg.Event, 1000)}
}

func (p *teePLEG) Events() <-chan *pleg.Event { return p.out }

// StreamsStatuses forwards the PLEG's, so that the agent's syncs take
// the statuses the events bring (podsync.Config.StatusEvents).
func (p *teePLEG) StreamsStatuses() bool {
	s, ok := p.EventGenerator.(interface{ StreamsStatuses() bool })
	return ok && s.StreamsStatuses()
}

func (p *teePLEG) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		in := p.EventGenerator.Events()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-in:
				p.mu.Lock()
				p.seen = append(p.seen, seenEvent{ev: ev, at: time.Now()})
				p.mu.Unlock()
				select {
				case p.out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	err := p.EventGenerator.Run(ctx)
	wg.Wait()
	return err
}

// first returns when the first event of type typ about container id came.
func (p *teePLEG) first(typ pleg.EventType, id string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.seen {
		if s.ev.Type == typ && s.ev.Data == id {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// containerPID returns the host PID of a container's process, from its
// verbose CRI status.
func containerPID(t *testing.T, rs runtime.RuntimeService, id string) int {
	t.Helper()
	st, err := rs.ContainerStatus(t.Context(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		t.Fatalf("no pid in the verbose status of %s (%v): %v", id, err, st.GetInfo())
	}
	return info.Pid
}

// TestEventedPLEG: the agent's PLEG is chosen by pleg.NewAuto over the CRI
// client. Against containerd 2.x it streams CRI container events: a
// container killed from outside is seen dying through the stream, well
// before any relist would, and restarted. Against containerd 1.6, which
// answers GetContainerEvents with Unimplemented, it falls back to
// relisting every second and says so once in its log, however often it
// retries the stream. Against containerd 2.x the events bring the pods'
// statuses (StreamsStatuses), so the restart's sync takes its status from
// them.
func TestEventedPLEG(t *testing.T) {
	for _, tc := range []struct {
		name        string
		endpointVar string
		streaming   bool
		maxLatency  time.Duration
	}{
		// Streaming, the safety-net relist comes every 5 minutes: a death
		// seen within seconds came through the stream; falling back, the
		// relist comes every second. The bounds, far below 5 minutes,
		// leave room for a loaded machine.
		{name: "containerd 2.x streams events", endpointVar: envEndpoint2, streaming: true, maxLatency: 15 * time.Second},
		{name: "containerd 1.6 falls back to relisting", endpointVar: envEndpoint, streaming: false, maxLatency: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.endpointVar)
			var (
				tee     *teePLEG
				evented *pleg.Evented
			)
			a := f.agentWith(nil, tc.name, func(o *nodekit.Options) {
				o.PLEG = func(rt runtime.RuntimeService, st pleg.StatusGetter, cache pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
					g, err := pleg.NewAuto(rt, st, cache, pleg.EventedOptions{
						// Retry the stream often: the fall-back must still
						// be logged only once.
						StreamRetryPeriod: time.Second,
						Logger:            log,
					})
					if err != nil {
						return nil, err
					}
					var ok bool
					if evented, ok = g.(*pleg.Evented); !ok {
						return nil, fmt.Errorf("pleg.NewAuto over the CRI client gave a %T, want *pleg.Evented", g)
					}
					tee = newTee(g)
					return tee, nil
				}
			})

			f.write(podSpec{name: "victim", script: sleepScript})
			pod := f.pod("victim")
			eventually(t, 30*time.Second, pod+" Running", func() bool { return a.running(pod) })
			const fallback = "container runtime does not stream container events; relisting instead"
			// Wait for the stream to settle: streaming, or fallen back
			// and said so (the retries that follow, one a second, must not
			// say it again: checked here and at the end).
			eventually(t, 30*time.Second, fmt.Sprintf("Streaming() = %t", tc.streaming), func() bool {
				if tc.streaming {
					return evented.Streaming()
				}
				return !evented.Streaming() && a.logs.count(fallback) > 0
			})
			wantLogs := 0
			if !tc.streaming {
				wantLogs = 1
			}
			if n := a.logs.count(fallback); n != wantLogs {
				t.Errorf("%q logged %d times, want %d", fallback, n, wantLogs)
			}
			// containerd 2.x sends each event with its pod's status: the
			// restart below takes its status from its events.
			if got := evented.StreamsStatuses(); got != tc.streaming {
				t.Errorf("StreamsStatuses() = %t, want %t", got, tc.streaming)
			}
			eventsBefore := evented.StreamEvents()

			s, _ := a.status(pod)
			cid := s.ContainerStatuses[0].ContainerID[len("containerd://"):]
			pid := containerPID(t, f.cri, cid)
			killed := time.Now()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill %d: %v", pid, err)
			}
			var died time.Time
			eventually(t, tc.maxLatency+10*time.Second, "the PLEG's ContainerDied event", func() bool {
				var ok bool
				died, ok = tee.first(pleg.ContainerDied, cid)
				return ok
			})
			latency := died.Sub(killed)
			t.Logf("container killed → ContainerDied from the PLEG after %s (streaming: %t, stream events: %d → %d)",
				latency.Round(time.Millisecond), evented.Streaming(), eventsBefore, evented.StreamEvents())
			if latency > tc.maxLatency {
				t.Errorf("ContainerDied came %s after the kill, want within %s", latency, tc.maxLatency)
			}
			if tc.streaming && evented.StreamEvents() == eventsBefore {
				t.Errorf("no container event came through the stream for the death")
			}
			eventually(t, 30*time.Second, pod+" restarted", func() bool {
				s, _ := a.status(pod)
				return a.running(pod) && s.ContainerStatuses[0].RestartCount == 1 && s.Phase == v1.PodRunning
			})
			if n := a.logs.count(fallback); n != wantLogs {
				t.Errorf("%q logged %d times by the end, want %d", fallback, n, wantLogs)
			}
		})
	}
}
