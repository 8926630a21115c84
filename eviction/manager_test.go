package eviction

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeNode is the stats, pods and kills of a manager under test.
type fakeNode struct {
	stats    *Stats
	err      error
	afterGC  *Stats // stats once the node-level reclaim ran, when set
	reclaims int
	pods     []*v1.Pod
	evicted  []string
	graces   []int64
	statuses []v1.PodStatus
	events   []string
}

func (f *fakeNode) Stats(context.Context) (*Stats, error) { return f.stats, f.err }

func (f *fakeNode) Event(_ apiruntime.Object, eventtype, reason, message string) {
	f.events = append(f.events, eventtype+" "+reason+": "+message)
}

func (f *fakeNode) options(clk *clocktesting.FakeClock, t *testing.T) Options {
	reclaim := func(context.Context) error {
		f.reclaims++
		if f.afterGC != nil {
			f.stats = f.afterGC
		}
		return nil
	}
	return Options{
		Stats:      f,
		ActivePods: func() []*v1.Pod { return f.pods },
		Evict: func(pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
			f.evicted = append(f.evicted, pod.Name)
			f.graces = append(f.graces, grace)
			s := v1.PodStatus{Phase: v1.PodRunning}
			status(&s)
			f.statuses = append(f.statuses, s)
		},
		ReclaimContainers: reclaim,
		ReclaimImages:     func(context.Context) error { return errors.New("image service refused") },
		Recorder:          f,
		Clock:             clk,
		Logger:            testr.New(t),
	}
}

func diskStats(availPercent uint64, pods map[types.UID]PodStats) *Stats {
	return &Stats{
		Memory: &MemoryStats{Available: 900 * mi, Capacity: 1000 * mi},
		NodeFs: &FsStats{AvailableBytes: availPercent, CapacityBytes: 100, InodesFree: 90, Inodes: 100},
		Pods:   pods,
	}
}

func TestSynchronize(t *testing.T) {
	podStats := map[types.UID]PodStats{"small": {EphemeralStorage: u64(1)}, "big": {EphemeralStorage: u64(50)}, "static": {EphemeralStorage: u64(99)}}
	static := pod("static", 0, "", false)
	static.Annotations["kubernetes.io/config.source"] = "file"
	t.Run("disk pressure resolved by node-level reclaim: no eviction", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		f := &fakeNode{stats: diskStats(5, podStats), afterGC: diskStats(50, podStats), pods: []*v1.Pod{pod("small", 0, "", false), pod("big", 0, "", false)}}
		m, err := New(f.options(clk, t))
		if err != nil {
			t.Fatal(err)
		}
		evicted, err := m.Synchronize(t.Context())
		if err != nil || len(evicted) != 0 || f.reclaims != 1 {
			t.Fatalf("Synchronize = %v, %v after %d reclaims; want no eviction after one reclaim", names(evicted), err, f.reclaims)
		}
		if !m.Pressure(v1.NodeDiskPressure) {
			t.Errorf("no DiskPressure while the threshold was met")
		}
	})
	t.Run("disk pressure not resolved: the largest user that is not critical is evicted, one per pass, at once", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		f := &fakeNode{stats: diskStats(5, podStats), pods: []*v1.Pod{pod("small", 0, "", false), static, pod("big", 0, "", false)}}
		var conds [][]v1.NodeConditionType
		var signals []string
		opts := f.options(clk, t)
		opts.OnConditions = func(c []v1.NodeConditionType) { conds = append(conds, c) }
		opts.OnEvict = func(signal string) { signals = append(signals, signal) }
		m, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Synchronize(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(f.evicted) != 1 || f.evicted[0] != "big" || f.graces[0] != 1 {
			t.Fatalf("evicted %v with grace %v; want big (static pods are critical) with 1s", f.evicted, f.graces)
		}
		if len(signals) != 1 || signals[0] != "nodefs.available" {
			t.Errorf("OnEvict signals %v, want [nodefs.available]", signals)
		}
		s := f.statuses[0]
		wantMsg := "The node was low on resource: ephemeral-storage. Threshold quantity: 10, available: 5. "
		if s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message != wantMsg {
			t.Errorf("status %q %q %q, want Failed Evicted %q", s.Phase, s.Reason, s.Message, wantMsg)
		}
		if len(f.events) != 1 || f.events[0] != "Warning Evicted: "+wantMsg {
			t.Errorf("events %q", f.events)
		}
		if len(conds) != 1 || len(conds[0]) != 1 || conds[0][0] != v1.NodeDiskPressure {
			t.Errorf("condition changes %v, want one to [DiskPressure]", conds)
		}
		// The pressure goes; the condition stays for the transition period.
		f.stats = diskStats(50, podStats)
		clk.Step(DefaultPressureTransitionPeriod - time.Second)
		m.Synchronize(t.Context())
		if !m.Pressure(v1.NodeDiskPressure) || len(f.evicted) != 1 {
			t.Errorf("within the transition period: conditions %v, evicted %v", m.Conditions(), f.evicted)
		}
		clk.Step(time.Second)
		m.Synchronize(t.Context())
		if len(m.Conditions()) != 0 || len(conds) != 2 {
			t.Errorf("after the transition period: conditions %v (changes %v)", m.Conditions(), conds)
		}
	})
	t.Run("stats unavailable: an error, nothing evicted, conditions kept", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		f := &fakeNode{stats: diskStats(5, podStats), pods: []*v1.Pod{pod("big", 0, "", false)}, afterGC: diskStats(5, podStats)}
		opts := f.options(clk, t)
		opts.ReclaimContainers = nil
		opts.ReclaimImages = nil
		opts.Evict = func(*v1.Pod, int64, func(*v1.PodStatus)) { f.evicted = append(f.evicted, "x") }
		m, _ := New(opts)
		f.err = errors.New("cgroupfs unreadable")
		if _, err := m.Synchronize(t.Context()); err == nil || !strings.Contains(err.Error(), "cgroupfs unreadable") {
			t.Errorf("Synchronize error %v", err)
		}
		if len(f.evicted) != 0 || len(m.Conditions()) != 0 {
			t.Errorf("acted on missing data: evicted %v, conditions %v", f.evicted, m.Conditions())
		}
	})
	t.Run("soft threshold: eviction after its grace period, with the pod's grace bounded by MaxPodGracePeriodSeconds", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		f := &fakeNode{
			stats: &Stats{Memory: &MemoryStats{Available: 400 * mi, Capacity: 1000 * mi}, Pods: map[types.UID]PodStats{"a": {MemoryWorkingSet: u64(300 * mi)}}},
			pods:  []*v1.Pod{pod("a", 0, "", false)},
		}
		grace := int64(60)
		f.pods[0].Spec.TerminationGracePeriodSeconds = &grace
		opts := f.options(clk, t)
		opts.Thresholds = []Threshold{{Signal: SignalMemoryAvailable, Value: Value{Quantity: qty("500Mi")}, GracePeriod: time.Minute}}
		opts.MaxPodGracePeriodSeconds = 30
		m, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		m.Synchronize(t.Context())
		clk.Step(59 * time.Second)
		m.Synchronize(t.Context())
		if len(f.evicted) != 0 {
			t.Fatalf("evicted %v before the grace period", f.evicted)
		}
		if ok, _, _ := m.Admit(pod("be", 0, "", false)); ok {
			t.Errorf("a BestEffort pod admitted under memory pressure")
		}
		clk.Step(time.Second)
		m.Synchronize(t.Context())
		if len(f.evicted) != 1 || f.graces[0] != 30 || f.reclaims != 0 {
			t.Errorf("evicted %v with grace %v after %d reclaims; want a with 30s and no node-level reclaim for memory", f.evicted, f.graces, f.reclaims)
		}
		if !strings.Contains(f.statuses[0].Message, "Threshold quantity: 500Mi, available: 400Mi") {
			t.Errorf("message %q", f.statuses[0].Message)
		}
	})
}

// TestRun: Run synchronizes every MonitoringInterval and returns nil when
// its context ends.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		m, err := New(Options{
			Stats:      StatsFunc(func(context.Context) (*Stats, error) { calls++; return &Stats{}, nil }),
			ActivePods: func() []*v1.Pod { return nil },
			Evict:      func(*v1.Pod, int64, func(*v1.PodStatus)) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if calls != 3 {
			t.Errorf("%d synchronizations in 25s, want 3 (at 0, 10s, 20s)", calls)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestNewChecksOptions(t *testing.T) {
	ok := Options{Stats: StatsFunc(nil), ActivePods: func() []*v1.Pod { return nil }, Evict: func(*v1.Pod, int64, func(*v1.PodStatus)) {}}
	for _, bad := range []func(o *Options){
		func(o *Options) { o.Stats = nil },
		func(o *Options) { o.Thresholds = []Threshold{{Signal: "cpu.available"}} },
		func(o *Options) {
			o.Thresholds = []Threshold{{Signal: SignalMemoryAvailable, Value: Value{Percentage: 2}}}
		},
		func(o *Options) { o.MonitoringInterval = -time.Second },
	} {
		o := ok
		bad(&o)
		if _, err := New(o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
}
