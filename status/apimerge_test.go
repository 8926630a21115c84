package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(t v1.PodConditionType, s v1.ConditionStatus, at metav1.Time) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: s, LastTransitionTime: at}
}

func TestMergeForAPI(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	now := t0.Add(time.Hour)
	tNow := metav1.NewTime(now)
	const gate v1.PodConditionType = "example.com/gate"
	tests := []struct {
		name         string
		stored, ours v1.PodStatus
		couldRun     bool
		want         v1.PodStatus
		wantHeld     bool
		wantStale    bool
	}{{
		name: "conditions the agent does not own are kept as stored",
		stored: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
			cond(gate, v1.ConditionTrue, t0), cond(v1.PodScheduled, v1.ConditionTrue, t0)}},
		ours: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
			cond(gate, v1.ConditionFalse, t1), cond(v1.PodReady, v1.ConditionTrue, t1), cond(v1.PodScheduled, v1.ConditionTrue, t1)}},
		couldRun: true,
		want: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
			cond(gate, v1.ConditionTrue, t0), cond(v1.PodReady, v1.ConditionTrue, t1), cond(v1.PodScheduled, v1.ConditionTrue, t0)}},
	}, {
		name:     "an owned condition the status lacks is kept",
		stored:   v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, t0)}},
		ours:     v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfpods"},
		couldRun: false,
		want:     v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfpods", Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, t0)}},
	}, {
		name: "resize conditions the status lacks are cleared",
		stored: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
			cond(v1.PodResizePending, v1.ConditionTrue, t0), cond(v1.PodResizeInProgress, v1.ConditionTrue, t0), cond(v1.PodScheduled, v1.ConditionTrue, t0)}},
		ours:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, t1)}},
		couldRun: true,
		want:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, t0)}},
	}, {
		name:     "terminal phase held back while containers could run",
		stored:   v1.PodStatus{Phase: v1.PodRunning, Reason: "r", Message: "m"},
		ours:     v1.PodStatus{Phase: v1.PodSucceeded},
		couldRun: true,
		want:     v1.PodStatus{Phase: v1.PodRunning, Reason: "r", Message: "m"},
		wantHeld: true,
	}, {
		name:   "terminal phase written once no container can run, Ready forced False",
		stored: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)}},
		ours: v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{
			cond(v1.PodReady, v1.ConditionTrue, t0), cond(v1.ContainersReady, v1.ConditionTrue, t0)}},
		couldRun: false,
		want: v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: tNow},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: tNow}}},
	}, {
		name:      "a stored terminal phase is never left",
		stored:    v1.PodStatus{Phase: v1.PodSucceeded},
		ours:      v1.PodStatus{Phase: v1.PodRunning},
		want:      v1.PodStatus{Phase: v1.PodSucceeded},
		wantStale: true,
	}, {
		name:     "DisruptionTarget of ours replaces the stored one with a terminal phase",
		stored:   v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionFalse, t0)}},
		ours:     v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionTrue, t1)}},
		couldRun: false,
		want:     v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionTrue, t1)}},
	}, {
		name:     "DisruptionTarget of ours waits for the terminal phase",
		stored:   v1.PodStatus{Phase: v1.PodRunning},
		ours:     v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionTrue, t1)}},
		couldRun: true,
		want:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{}},
		wantHeld: true,
	}, {
		name: "start time, QoS class, host IPs and nominated node stored are kept",
		stored: v1.PodStatus{Phase: v1.PodPending, StartTime: &t0, QOSClass: v1.PodQOSBurstable, HostIP: "10.0.0.1",
			HostIPs: []v1.HostIP{{IP: "10.0.0.1"}}, NominatedNodeName: "n"},
		ours:     v1.PodStatus{Phase: v1.PodRunning, StartTime: &t1},
		couldRun: true,
		want: v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0, QOSClass: v1.PodQOSBurstable, HostIP: "10.0.0.1",
			HostIPs: []v1.HostIP{{IP: "10.0.0.1"}}, NominatedNodeName: "n", Conditions: []v1.PodCondition{}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, held, stale := mergeForAPI(tt.stored, tt.ours, tt.couldRun, now)
			if stale != tt.wantStale {
				t.Fatalf("stale = %v, want %v", stale, tt.wantStale)
			}
			if held != tt.wantHeld {
				t.Errorf("heldBack = %v, want %v", held, tt.wantHeld)
			}
			if tt.want.Conditions == nil && got.Conditions != nil && len(got.Conditions) == 0 {
				got.Conditions = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("merged status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusPatch(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "7"}, Status: v1.PodStatus{
		Phase: v1.PodRunning, StartTime: &t0,
		Conditions: []v1.PodCondition{cond("example.com/gate", v1.ConditionTrue, t0), cond(v1.PodReady, v1.ConditionFalse, t0)},
	}}
	t.Run("same status at second precision", func(t *testing.T) {
		s := *api.Status.DeepCopy()
		nanos := metav1.NewTime(t0.Add(300 * time.Millisecond))
		s.StartTime = &nanos
		got, err := statusPatch(api, s)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			t.Errorf("patch = %s, want none", got)
		}
	})
	t.Run("changed condition", func(t *testing.T) {
		s := *api.Status.DeepCopy()
		s.Conditions[1].Status = v1.ConditionTrue
		got, err := statusPatch(api, s)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Metadata map[string]string `json:"metadata"`
			Status   struct {
				Conditions []map[string]any `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(got, &p); err != nil {
			t.Fatalf("patch %s: %v", got, err)
		}
		if diff := cmp.Diff(map[string]string{"uid": "u1", "resourceVersion": "7"}, p.Metadata); diff != "" {
			t.Errorf("preconditions (-want +got):\n%s", diff)
		}
		// Only the Ready condition is in the patch: the foreign one is
		// left alone.
		if len(p.Status.Conditions) != 1 || p.Status.Conditions[0]["type"] != "Ready" || p.Status.Conditions[0]["status"] != "True" {
			t.Errorf("patch conditions = %v, want only Ready=True", p.Status.Conditions)
		}
	})
}
