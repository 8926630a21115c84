package gc

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// ctr is a container of pod uid named name, in sandbox sb, created age
// before t0.
func ctr(id, uid, name, sb string, state runtimeapi.ContainerState, age time.Duration) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           id,
		PodSandboxId: sb,
		Metadata:     &runtimeapi.ContainerMetadata{Name: name},
		State:        state,
		CreatedAt:    t0.Add(-age).UnixNano(),
		Labels:       map[string]string{runtime.LabelPodUID: uid, runtime.LabelContainerName: name},
	}
}

func sbx(id, uid string, ready bool, age time.Duration) *runtimeapi.PodSandbox {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandbox{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "p" + uid, Namespace: "ns", Uid: uid},
		State:     st,
		CreatedAt: t0.Add(-age).UnixNano(),
		Labels:    map[string]string{runtime.LabelPodUID: uid},
	}
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

// pods is a PodState: the pods listed are deleted (content removable);
// terminated ones only have their runtime removable.
type pods struct {
	deleted    map[types.UID]bool
	terminated map[types.UID]bool
}

func (p pods) ShouldPodContentBeRemoved(uid types.UID) bool { return p.deleted[uid] }
func (p pods) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return p.deleted[uid] || p.terminated[uid]
}

func ids(plan ContainerPlan) (cs, sbs []string) {
	for _, c := range plan.Containers {
		cs = append(cs, c.ID)
	}
	for _, s := range plan.Sandboxes {
		sbs = append(sbs, s.ID)
	}
	return cs, sbs
}

func TestPlanContainers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		l             Listing
		pods          pods
		policy        ContainerPolicy
		notReady      bool // sources not ready
		evict         bool // evictNonDeletedPods
		wantC, wantSB []string
		wantLogs      []string
		wantKill      []string
	}{{
		name: "a running pod's current containers stay; one dead instance per container is kept",
		l: Listing{Containers: []*runtimeapi.Container{
			ctr("run", "a", "app", "s1", running, time.Minute),
			ctr("dead1", "a", "app", "s1", exited, 2*time.Minute),
			ctr("dead2", "a", "app", "s1", exited, 3*time.Minute),
			ctr("dead3", "a", "app", "s1", exited, 4*time.Minute),
			ctr("side", "a", "side", "s1", exited, 4*time.Minute),
		}, Sandboxes: []*runtimeapi.PodSandbox{sbx("s1", "a", true, 5*time.Minute)}},
		// Oldest first.
		wantC: []string{"dead3", "dead2"},
	}, {
		name: "minimum age protects young dead containers",
		l: Listing{Containers: []*runtimeapi.Container{
			ctr("d1", "a", "app", "s1", exited, 10*time.Second),
			ctr("d2", "a", "app", "s1", exited, 20*time.Second),
			ctr("d3", "a", "app", "s1", exited, 2*time.Minute),
			ctr("d4", "a", "app", "s1", exited, 3*time.Minute),
		}},
		policy: ContainerPolicy{MinAge: time.Minute},
		wantC:  []string{"d4"},
	}, {
		name: "no dead instance kept with KeepNoDeadContainers; unknown containers are stopped first",
		l: Listing{Containers: []*runtimeapi.Container{
			ctr("d1", "a", "app", "s1", exited, time.Minute),
			ctr("u1", "a", "other", "s1", unknown, time.Minute),
		}},
		policy:   ContainerPolicy{MaxPerPodContainer: KeepNoDeadContainers},
		wantC:    []string{"d1", "u1"},
		wantKill: []string{"u1"},
	}, {
		name: "a negative per-container limit keeps every dead instance",
		l: Listing{Containers: []*runtimeapi.Container{
			ctr("d1", "a", "app", "s1", exited, time.Minute),
			ctr("d2", "a", "app", "s1", exited, 2*time.Minute),
		}},
		policy: ContainerPolicy{MaxPerPodContainer: -1},
	}, {
		name: "a deleted pod loses everything but what runs; its logs go",
		l: Listing{
			Containers: []*runtimeapi.Container{
				ctr("d1", "gone", "app", "s1", exited, time.Minute),
				ctr("d2", "gone", "app", "s1", exited, 2*time.Minute),
				ctr("c1", "gone", "init", "s2", created, 2*time.Minute),
			},
			Sandboxes: []*runtimeapi.PodSandbox{sbx("s1", "gone", false, time.Minute), sbx("s2", "gone", false, 2*time.Minute)},
			LogDirs:   []string{"ns_p_gone", "ns_q_alive", "junk"},
		},
		pods: pods{deleted: map[types.UID]bool{"gone": true}},
		// The sandboxes go with their containers, in the same pass.
		wantC:    []string{"d2", "d1", "c1"},
		wantSB:   []string{"s2", "s1"},
		wantLogs: []string{"ns_p_gone"},
	}, {
		name: "nothing of a deleted pod goes while the sources are not ready, but the per-container limit holds",
		l: Listing{
			Containers: []*runtimeapi.Container{
				ctr("d1", "gone", "app", "s1", exited, time.Minute),
				ctr("d2", "gone", "app", "s1", exited, 2*time.Minute),
			},
			Sandboxes: []*runtimeapi.PodSandbox{sbx("s1", "gone", false, time.Minute), sbx("s0", "gone", false, 3*time.Minute)},
			LogDirs:   []string{"ns_p_gone"},
		},
		pods:     pods{deleted: map[types.UID]bool{"gone": true}},
		notReady: true,
		wantC:    []string{"d2"},
		wantSB:   []string{"s0"},
	}, {
		name: "a deleted pod's empty dead sandboxes all go",
		l: Listing{Sandboxes: []*runtimeapi.PodSandbox{
			sbx("s1", "gone", false, time.Minute), sbx("s2", "gone", false, 2*time.Minute),
		}},
		pods:   pods{deleted: map[types.UID]bool{"gone": true}},
		wantSB: []string{"s2", "s1"},
	}, {
		name: "a live pod keeps its newest sandbox and every active one; half-made ones go",
		l: Listing{
			Containers: []*runtimeapi.Container{ctr("c", "a", "app", "s3", running, time.Second)},
			Sandboxes: []*runtimeapi.PodSandbox{
				sbx("s3", "a", true, time.Second),    // current
				sbx("s2", "a", false, time.Minute),   // half-made by a crash
				sbx("s1", "a", false, 2*time.Minute), // old
				sbx("s0", "a", true, 3*time.Minute),  // ready: active
				sbx("sb", "b", false, 3*time.Minute), // b's only sandbox: kept
				sbx("sx", "", false, 3*time.Minute),  // not the agent's
			},
		},
		wantSB: []string{"s1", "s2"},
	}, {
		name: "the newest sandbox is kept even when not ready (the pod may be restarting)",
		l: Listing{Sandboxes: []*runtimeapi.PodSandbox{
			sbx("new", "a", false, time.Second), sbx("old", "a", false, time.Minute),
		}},
		wantSB: []string{"old"},
	}, {
		name: "evictNonDeletedPods also clears terminated pods",
		l: Listing{
			Containers: []*runtimeapi.Container{ctr("d1", "done", "app", "s1", exited, time.Minute)},
			Sandboxes:  []*runtimeapi.PodSandbox{sbx("s1", "done", false, time.Minute)},
			LogDirs:    []string{"ns_p_done"},
		},
		pods:   pods{terminated: map[types.UID]bool{"done": true}},
		evict:  true,
		wantC:  []string{"d1"},
		wantSB: []string{"s1"},
	}, {
		name: "terminated but not deleted: kept without evictNonDeletedPods",
		l: Listing{
			Containers: []*runtimeapi.Container{ctr("d1", "done", "app", "s1", exited, time.Minute)},
			Sandboxes:  []*runtimeapi.PodSandbox{sbx("s1", "done", false, time.Minute)},
		},
		pods: pods{terminated: map[types.UID]bool{"done": true}},
	}, {
		name: "over MaxContainers: an equal share per container, then the oldest go",
		l: Listing{Containers: []*runtimeapi.Container{
			ctr("a1", "a", "app", "s", exited, 1*time.Minute),
			ctr("a2", "a", "app", "s", exited, 2*time.Minute),
			ctr("a3", "a", "app", "s", exited, 3*time.Minute),
			ctr("b1", "b", "app", "s", exited, 4*time.Minute),
			ctr("b2", "b", "app", "s", exited, 5*time.Minute),
			ctr("c1", "c", "app", "s", exited, 6*time.Minute),
		}},
		policy: ContainerPolicy{MaxPerPodContainer: -1, MaxContainers: 2},
		// Share: max(2/3, 1) = 1 per unit: a3, a2, b2 go; then 3 > 2: the
		// oldest of a1, b1, c1 goes.
		wantC: []string{"a3", "a2", "b2", "c1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pods.deleted == nil {
				tc.pods.deleted = map[types.UID]bool{}
			}
			plan := PlanContainers(t0, tc.l, tc.pods, tc.policy, !tc.notReady, tc.evict)
			gotC, gotSB := ids(plan)
			if diff := cmp.Diff(tc.wantC, gotC); diff != "" {
				t.Errorf("containers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSB, gotSB); diff != "" {
				t.Errorf("sandboxes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLogs, plan.LogDirs); diff != "" {
				t.Errorf("log directories (-want +got):\n%s", diff)
			}
			var kill []string
			for _, c := range plan.Containers {
				if c.Kill {
					kill = append(kill, c.ID)
				}
			}
			if diff := cmp.Diff(tc.wantKill, kill); diff != "" {
				t.Errorf("killed first (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogDirUID(t *testing.T) {
	for dir, want := range map[string]types.UID{
		"ns_name_1234-5678": "1234-5678",
		"my_ns_my_pod_uid":  "uid",
		"nouid":             "",
		"a/b_c":             "",
	} {
		if got := logDirUID(dir); got != want {
			t.Errorf("logDirUID(%q) = %q, want %q", dir, got, want)
		}
	}
}
