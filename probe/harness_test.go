package probe

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// harness runs a Manager against a scripted prober and pod statuses held by
// the test, recording probe calls and published updates with their times
// (since the harness started). Use it inside synctest.Test.
type harness struct {
	t     *testing.T
	m     *Manager
	start time.Time

	mu       sync.Mutex
	pods     map[types.UID]*v1.Pod
	statuses map[types.UID]v1.PodStatus
	// script gives each probe type's results in order; the last repeats.
	script map[Type][]Result
	errs   map[Type]error
	calls  map[Type][]time.Duration
	// block makes the prober wait for its context to end.
	block   bool
	updates []rec
	// autoSync applies UpdatePodStatus to the held status after each
	// update, as the agent's sync does.
	autoSync bool
	metrics  map[Type]map[Result]int
}

// rec is one published update.
type rec struct {
	Type   Type
	Result Result
	ID     string
	At     time.Duration
}

func newHarness(t *testing.T, mods ...func(*Options)) *harness {
	h := &harness{
		t:        t,
		start:    time.Now(),
		pods:     map[types.UID]*v1.Pod{},
		statuses: map[types.UID]v1.PodStatus{},
		script:   map[Type][]Result{},
		errs:     map[Type]error{},
		calls:    map[Type][]time.Duration{},
		metrics:  map[Type]map[Result]int{},
	}
	opts := Options{
		Prober:  ProberFunc(h.probe),
		Logger:  testr.NewWithOptions(t, testr.Options{Verbosity: 4}),
		Metrics: h,
	}
	for _, mod := range mods {
		mod(&opts)
	}
	m, err := NewManager(h.status, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

func (h *harness) since() time.Duration { return time.Since(h.start) }

func (h *harness) probe(ctx context.Context, req Request) (Result, string, error) {
	h.mu.Lock()
	h.calls[req.Type] = append(h.calls[req.Type], h.since())
	s := h.script[req.Type]
	r := Success
	if len(s) > 0 {
		r = s[0]
		if len(s) > 1 {
			h.script[req.Type] = s[1:]
		}
	}
	err, block := h.errs[req.Type], h.block
	h.mu.Unlock()
	if block {
		<-ctx.Done()
		return Unknown, "", ctx.Err()
	}
	if err != nil {
		return Unknown, "", err
	}
	return r, "output", nil
}

func (h *harness) ObserveProbe(t Type, r Result, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.metrics[t] == nil {
		h.metrics[t] = map[Result]int{}
	}
	h.metrics[t][r]++
}

func (h *harness) status(uid types.UID) (v1.PodStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.statuses[uid]
	return *s.DeepCopy(), ok
}

func (h *harness) setStatus(pod *v1.Pod, s v1.PodStatus) {
	h.mu.Lock()
	h.pods[pod.UID] = pod
	h.statuses[pod.UID] = s
	h.mu.Unlock()
}

// sync applies the manager's UpdatePodStatus to the held status.
func (h *harness) sync(pod *v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.statuses[pod.UID]
	h.m.UpdatePodStatus(pod, &s)
	h.statuses[pod.UID] = s
}

// run starts the manager and the update collector; the returned function
// stops them and waits for them to exit.
func (h *harness) run() (stop func()) {
	ctx, cancel := context.WithCancel(h.t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := h.m.Run(ctx); err != nil {
			h.t.Errorf("Run = %v", err)
		}
	})
	wg.Go(func() {
		for {
			var u Update
			var t Type
			select {
			case <-ctx.Done():
				return
			case u = <-h.m.Liveness():
				t = Liveness
			case u = <-h.m.Readiness():
				t = Readiness
			case u = <-h.m.Startup():
				t = Startup
			}
			h.mu.Lock()
			h.updates = append(h.updates, rec{Type: t, Result: u.Result, ID: u.ContainerID, At: h.since()})
			auto, pod := h.autoSync, h.pods[u.PodUID]
			h.mu.Unlock()
			if auto && pod != nil {
				h.sync(pod)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// takeUpdates returns the updates recorded so far and forgets them.
func (h *harness) takeUpdates() []rec {
	h.mu.Lock()
	defer h.mu.Unlock()
	u := h.updates
	h.updates = nil
	return u
}

func (h *harness) callTimes(t Type) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.calls[t]...)
}

func (h *harness) setScript(t Type, rs ...Result) {
	h.mu.Lock()
	h.script[t] = rs
	h.mu.Unlock()
}

// testPod is a pod with one container "app" and the given probes
// (PeriodSeconds 1 unless set).
func testPod(uid types.UID, liveness, readiness, startup *v1.Probe) *v1.Pod {
	for _, p := range []*v1.Probe{liveness, readiness, startup} {
		if p != nil && p.PeriodSeconds == 0 {
			p.PeriodSeconds = 1
		}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, Name: "pod-" + string(uid), Namespace: "default"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{
				Name: "app", LivenessProbe: liveness, ReadinessProbe: readiness, StartupProbe: startup,
			}},
		},
	}
}

func execProbe(mod func(*v1.Probe)) *v1.Probe {
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

// runningStatus is the status of a pod whose container "app" runs as id
// since startedAt, with the given Started flag.
func runningStatus(id string, startedAt time.Time, started bool) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: "10.88.0.2",
		ContainerStatuses: []v1.ContainerStatus{{
			Name:        "app",
			ContainerID: "fake://" + id,
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
			Started:     &started,
		}},
	}
}

func exitedStatus(id string) v1.PodStatus {
	f := false
	return v1.PodStatus{
		Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{
			Name:        "app",
			ContainerID: "fake://" + id,
			State:       v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}},
			Started:     &f,
		}},
	}
}

func secs(ns ...int) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n) * time.Second
	}
	return out
}

func typesUID(s string) types.UID { return types.UID(s) }
