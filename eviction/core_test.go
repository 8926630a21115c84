package eviction

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
)

const mi = 1 << 20

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestParseThresholds(t *testing.T) {
	got, err := ParseThresholds(Config{
		Hard:            map[string]string{"memory.available": "200Mi", "nodefs.available": "10%", "imagefs.available": "0%"},
		Soft:            map[string]string{"memory.available": "500Mi"},
		SoftGracePeriod: map[string]string{"memory.available": "1m30s"},
		MinimumReclaim:  map[string]string{"memory.available": "100Mi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, th := range got {
		x := th.String()
		if th.MinReclaim != nil {
			x += " reclaim " + th.MinReclaim.String()
		}
		s = append(s, x)
	}
	want := []string{"memory.available<200Mi reclaim 100Mi", "nodefs.available<10%", "memory.available<500Mi for 1m30s reclaim 100Mi"}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("thresholds (-want +got):\n%s", diff)
	}
	def, err := ParseThresholds(Config{})
	if err != nil || len(def) != 4 {
		t.Errorf("defaults = %v, %v; want the kubelet's four", def, err)
	}
	if none, err := ParseThresholds(Config{Hard: map[string]string{}}); err != nil || len(none) != 0 {
		t.Errorf("empty Hard = %v, %v; want none", none, err)
	}
	for _, bad := range []Config{
		{Hard: map[string]string{"memory.free": "1Mi"}},
		{Hard: map[string]string{"memory.available": "lots"}},
		{Hard: map[string]string{"nodefs.available": "120%"}},
		{Hard: map[string]string{"memory.available": "-1Mi"}},
		{Soft: map[string]string{"memory.available": "1Gi"}},
		{Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "soon"}},
		{SoftGracePeriod: map[string]string{"memory.available": "1m"}},
	} {
		if _, err := ParseThresholds(bad); err == nil || !strings.HasPrefix(err.Error(), "eviction: ") {
			t.Errorf("ParseThresholds(%+v) = %v, want an error", bad, err)
		}
	}
}

func TestHardReservation(t *testing.T) {
	capacity := v1.ResourceList{v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	got := HardReservation(append(DefaultHard(), Threshold{Signal: SignalMemoryAvailable, Value: Value{Quantity: qty("1Gi")}, GracePeriod: time.Minute}), capacity)
	// 10% is a float32, as in the kubelet's configuration: 10% of 100Gi is
	// the kubelet's int64(float64(100Gi) * float64(float32(0.1))).
	tenPercent := int64(float64(100<<30) * float64(float32(0.1)))
	want := v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi"), v1.ResourceEphemeralStorage: *resource.NewQuantity(tenPercent, resource.BinarySI)}
	for name, w := range want {
		g := got[name]
		if g.Cmp(w) != 0 {
			t.Errorf("%s: %s, want %s", name, g.String(), w.String())
		}
	}
	if len(got) != 2 {
		t.Errorf("reservation %v: only memory and ephemeral-storage, soft thresholds left out", got)
	}
}

// memObs is a memory observation of avail MiB out of 1000 MiB.
func memObs(avail int64) Observations {
	return Observations{SignalMemoryAvailable: {Available: avail * mi, Capacity: 1000 * mi}}
}

// TestStepGraceAndTransition follows the kubelet's rules with a fake
// clock: a soft threshold shows pressure at once but acts only once met
// for its grace period; leaving it resets the grace; a hard threshold
// acts at once; once acted on it stays met until the signal is back above
// it by the minimum reclaim; the condition stays for the transition
// period after its last observation.
func TestStepGraceAndTransition(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	soft := Threshold{Signal: SignalMemoryAvailable, Value: Value{Quantity: qty("300Mi")}, GracePeriod: 30 * time.Second}
	hard := Threshold{Signal: SignalMemoryAvailable, Value: Value{Quantity: qty("100Mi")}, MinReclaim: &Value{Quantity: qty("50Mi")}}
	ths := []Threshold{soft, hard}
	var st State
	type step struct {
		after      time.Duration
		avail      int64 // MiB
		wantActing []string
		wantCond   bool
	}
	for i, s := range []step{
		{0, 500, nil, false},
		{10 * time.Second, 250, nil, true},                                    // soft met: pressure, no action yet
		{20 * time.Second, 250, nil, true},                                    // 20s < 30s grace
		{10 * time.Second, 250, []string{soft.String()}, true},                // 30s: acts
		{10 * time.Second, 400, nil, true},                                    // resolved; condition stays
		{10 * time.Second, 250, nil, true},                                    // met again: grace restarts
		{20 * time.Second, 90, []string{hard.String()}, true},                 // hard acts at once (soft at 20s of 30)
		{10 * time.Second, 120, []string{soft.String(), hard.String()}, true}, // above 100Mi but not 150Mi: still met
		{10 * time.Second, 160, []string{soft.String()}, true},                // min reclaim reached
		{10 * time.Second, 900, nil, true},                                    // resolved
		{5*time.Minute - 20*time.Second, 900, nil, true},                      // 4m50s after the last pressure
		{10 * time.Second, 900, nil, false},                                   // 5m: the condition goes
	} {
		clk.Step(s.after)
		var acting []Threshold
		st, acting = Step(clk.Now(), ths, memObs(s.avail), st, DefaultPressureTransitionPeriod)
		var got []string
		for _, a := range acting {
			got = append(got, a.String())
		}
		if diff := cmp.Diff(s.wantActing, got); diff != "" {
			t.Errorf("step %d (%dMi): acting (-want +got):\n%s", i, s.avail, diff)
		}
		if cond := len(st.Conditions) == 1 && st.Conditions[0] == v1.NodeMemoryPressure; cond != s.wantCond || (!s.wantCond && len(st.Conditions) != 0) {
			t.Errorf("step %d (%dMi): conditions %v, want MemoryPressure %t", i, s.avail, st.Conditions, s.wantCond)
		}
	}
}

// TestStepMissingData: without data for a signal nothing of it is met,
// and the other signals still count.
func TestStepMissingData(t *testing.T) {
	now := time.Now()
	obs := Observe(&Stats{NodeFs: &FsStats{AvailableBytes: 5, CapacityBytes: 100, InodesFree: 50, Inodes: 100}})
	st, acting := Step(now, DefaultHard(), obs, State{}, time.Minute)
	var got []string
	for _, a := range acting {
		got = append(got, a.String())
	}
	// nodefs 5% < 10%, and the image file system is the node's: 5% < 15%.
	want := []string{"nodefs.available<10%", "imagefs.available<15%"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("acting (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]v1.NodeConditionType{v1.NodeDiskPressure}, st.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if _, acting := Step(now, DefaultHard(), Observe(nil), State{}, time.Minute); len(acting) != 0 {
		t.Errorf("no stats: acting %v", acting)
	}
	if _, acting := Step(now, DefaultHard(), Observe(&Stats{Memory: &MemoryStats{}}), State{}, time.Minute); len(acting) != 0 {
		t.Errorf("zero memory capacity (unknown): acting %v", acting)
	}
}
