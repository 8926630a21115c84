package volume

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// planRefresher is a Refresher asking to refresh configMap volumes only.
type planRefresher struct{ Funcs }

func (planRefresher) RequiresRefresh(vol *v1.Volume) bool { return vol.ConfigMap != nil }

func plainPlugin() Plugin     { return Funcs{PluginName: "test/plain"} }
func refresherPlugin() Plugin { return planRefresher{Funcs{PluginName: "test/refresher"}} }

// planPod is a pod with the given volumes, in this order, each mounted by
// its container: configMap volumes when named cfg*, emptyDir otherwise.
func planPod(names ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "uid-p"}}
	c := v1.Container{Name: "app"}
	for _, name := range names {
		vol := v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
		if strings.HasPrefix(name, "cfg") {
			vol.VolumeSource = v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: name, MountPath: "/" + name})
	}
	pod.Spec.Containers = []v1.Container{c}
	return pod
}

// unmountedBy makes no container of the pod mount the volumes named, which
// stay in its spec.
func unmountedBy(pod *v1.Pod, names ...string) *v1.Pod {
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(vm v1.VolumeMount) bool {
		return slices.Contains(names, vm.Name)
	})
	return pod
}

// mountedBy is an actual state's mounted volumes, set up by plugin.
func mountedBy(plugin Plugin, names ...string) map[string]mounted {
	out := map[string]mounted{}
	for _, name := range names {
		out[name] = mounted{mount: Mount{Name: name, HostPath: "/x/" + name}, plugin: plugin, dir: "/x/" + name}
	}
	return out
}

// mountedAll is mountedBy with the refresher for cfg* volumes, the plain
// plugin for the others.
func mountedAll(names ...string) map[string]mounted {
	out := map[string]mounted{}
	for _, name := range names {
		p := plainPlugin()
		if strings.HasPrefix(name, "cfg") {
			p = refresherPlugin()
		}
		out[name] = mountedBy(p, name)[name]
	}
	return out
}

// describe is a step as the tables spell it.
func describe(s step) string {
	kind := map[stepKind]string{
		stepRefresh:  "refresh",
		stepUnmount:  "unmount",
		stepMakeDirs: "make dirs",
		stepMount:    "mount",
		stepRelease:  "release",
	}[s.kind]
	if kind == "" {
		kind = "unknown step"
	}
	if s.name == "" {
		return kind
	}
	return kind + " " + s.name
}

func TestPlan(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	errBoom := errors.New("boom")
	notDue := &failure{err: errBoom, attempts: 3, retryAt: now.Add(time.Nanosecond)}
	due := &failure{err: errBoom, attempts: 3, retryAt: now}
	long := &failure{err: errBoom, attempts: 9, retryAt: now.Add(-time.Minute)}

	tests := []struct {
		name string
		pod  *v1.Pod // nil: the pod should not run
		cur  actual
		pass pass

		want       []string
		refreshDue bool
	}{
		// A pod that should run.
		{
			name: "new volume: mount",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true},
			want: []string{"mount a"},
		},
		{
			name: "mounted volume: nothing",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a")},
		},
		{
			name: "volumes mounted in name order",
			pod:  planPod("d", "b", "e", "a", "c"),
			cur:  actual{dirsMade: true, mounted: mountedAll("b")},
			want: []string{"mount a", "mount c", "mount d", "mount e"},
		},
		{
			name: "volume in the spec that no container mounts: not mounted",
			pod:  unmountedBy(planPod("a", "b"), "b"),
			cur:  actual{dirsMade: true},
			want: []string{"mount a"},
		},
		{
			name: "volume no container mounts any more: unmount",
			pod:  unmountedBy(planPod("a", "b"), "b"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a", "b")},
			want: []string{"unmount b"},
		},
		{
			name: "volume gone from the spec: unmount",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a", "z")},
			want: []string{"unmount z"},
		},
		{
			name: "unmounts in name order, before the mounts",
			pod:  planPod("a", "b"),
			cur:  actual{dirsMade: true, mounted: mountedAll("y", "w", "z", "a", "x")},
			want: []string{"unmount w", "unmount x", "unmount y", "unmount z", "mount b"},
		},
		{
			name: "failed mount not yet due: nothing",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, failed: map[string]*failure{"a": notDue}},
		},
		{
			name: "failed mount due: retry",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, failed: map[string]*failure{"a": due}},
			want: []string{"mount a"},
		},
		{
			name: "failed mount long due: retry",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, failed: map[string]*failure{"a": long}},
			want: []string{"mount a"},
		},
		{
			name: "a volume's back-off holds back that volume alone",
			pod:  planPod("a", "b"),
			cur:  actual{dirsMade: true, failed: map[string]*failure{"a": notDue}},
			want: []string{"mount b"},
		},
		{
			name: "force: failed mount retried before it is due",
			pod:  planPod("a", "b"),
			cur:  actual{dirsMade: true, failed: map[string]*failure{"a": notDue}, mounted: mountedAll("b")},
			pass: pass{force: true},
			want: []string{"mount a"},
		},
		{
			name: "force: mounted volume left alone",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a")},
			pass: pass{force: true},
		},
		{
			name: "pod directories made before the mounts",
			pod:  planPod("b", "a"),
			want: []string{"make dirs", "mount a", "mount b"},
		},
		{
			name: "pod without volumes: directories only",
			pod:  planPod(),
			want: []string{"make dirs"},
		},
		{
			name: "pod directories made: nothing",
			pod:  planPod(),
			cur:  actual{dirsMade: true},
		},
		{
			name: "pod directories failed, not yet due: the plan ends before them, after the unmounts",
			pod:  planPod("a"),
			cur:  actual{podFailure: notDue, mounted: mountedAll("z")},
			want: []string{"unmount z"},
		},
		{
			name: "pod directories failed, due: retry",
			pod:  planPod("a"),
			cur:  actual{podFailure: due},
			want: []string{"make dirs", "mount a"},
		},
		{
			name: "force: pod directories made before their failure is due",
			pod:  planPod("a"),
			cur:  actual{podFailure: notDue},
			pass: pass{force: true},
			want: []string{"make dirs", "mount a"},
		},
		{
			name: "pod failure ignored once the directories are made",
			pod:  planPod("a"),
			cur:  actual{dirsMade: true, podFailure: notDue},
			want: []string{"mount a"},
		},

		// Refresh.
		{
			name:       "refresh due: refreshable volume refreshed",
			pod:        planPod("a", "cfg"),
			cur:        actual{dirsMade: true, mounted: mountedAll("a", "cfg"), refreshAt: now},
			pass:       pass{refresh: true},
			want:       []string{"refresh cfg"},
			refreshDue: true,
		},
		{
			name:       "refresh due at first",
			pod:        planPod("cfg"),
			cur:        actual{dirsMade: true, mounted: mountedAll("cfg")},
			pass:       pass{refresh: true},
			want:       []string{"refresh cfg"},
			refreshDue: true,
		},
		{
			name: "refresh not yet due: nothing",
			pod:  planPod("cfg"),
			cur:  actual{dirsMade: true, mounted: mountedAll("cfg"), refreshAt: now.Add(time.Nanosecond)},
			pass: pass{refresh: true},
		},
		{
			name: "refresh due, but the pass does not refresh: nothing",
			pod:  planPod("cfg"),
			cur:  actual{dirsMade: true, mounted: mountedAll("cfg")},
		},
		{
			name:       "refresh due, nothing refreshable: due all the same",
			pod:        planPod("a"),
			cur:        actual{dirsMade: true, mounted: mountedAll("a")},
			pass:       pass{refresh: true},
			refreshDue: true,
		},
		{
			name:       "refresh due: volume of a plugin that is no Refresher not refreshed",
			pod:        planPod("cfg"),
			cur:        actual{dirsMade: true, mounted: mountedBy(plainPlugin(), "cfg")},
			pass:       pass{refresh: true},
			refreshDue: true,
		},
		{
			name:       "refresh due: volume its Refresher does not ask for not refreshed",
			pod:        planPod("a"),
			cur:        actual{dirsMade: true, mounted: mountedBy(refresherPlugin(), "a")},
			pass:       pass{refresh: true},
			refreshDue: true,
		},
		{
			name:       "refresh due: volume not mounted is mounted, not refreshed",
			pod:        planPod("cfg"),
			cur:        actual{dirsMade: true},
			pass:       pass{refresh: true},
			want:       []string{"mount cfg"},
			refreshDue: true,
		},
		{
			name:       "refreshes in the order of the spec, before the unmounts",
			pod:        planPod("cfg-b", "cfg-a"),
			cur:        actual{dirsMade: true, mounted: mountedAll("cfg-a", "cfg-b", "z")},
			pass:       pass{refresh: true},
			want:       []string{"refresh cfg-b", "refresh cfg-a", "unmount z"},
			refreshDue: true,
		},
		{
			name:       "refresh due while the pod directories wait for their back-off",
			pod:        planPod("cfg"),
			cur:        actual{mounted: mountedAll("cfg"), podFailure: notDue},
			pass:       pass{refresh: true},
			want:       []string{"refresh cfg"},
			refreshDue: true,
		},

		// A pod that should not run.
		{
			name: "pod removed: unmount all in name order, then release",
			cur:  actual{dirsMade: true, mounted: mountedAll("d", "b", "e", "a", "c")},
			want: []string{"unmount a", "unmount b", "unmount c", "unmount d", "unmount e", "release"},
		},
		{
			name: "pod removed, nothing mounted: release",
			cur:  actual{dirsMade: true},
			want: []string{"release"},
		},
		{
			name: "pod removed, release failed, not yet due: nothing",
			cur:  actual{dirsMade: true, mounted: mountedAll("a"), podFailure: notDue},
		},
		{
			name: "pod removed, release failed, due: retry",
			cur:  actual{dirsMade: true, mounted: mountedAll("a"), podFailure: due},
			want: []string{"unmount a", "release"},
		},
		{
			name: "pod removed, force: release before its failure is due",
			cur:  actual{dirsMade: true, mounted: mountedAll("a"), podFailure: notDue},
			pass: pass{force: true},
			want: []string{"unmount a", "release"},
		},
		{
			name: "pod removed: no refresh, no retry of failed mounts",
			cur:  actual{dirsMade: true, mounted: mountedAll("cfg"), failed: map[string]*failure{"a": due}},
			pass: pass{refresh: true},
			want: []string{"unmount cfg", "release"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			steps, refreshDue := plan(tc.pod, tc.cur, now, tc.pass)
			var got []string
			for _, s := range steps {
				got = append(got, describe(s))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if refreshDue != tc.refreshDue {
				t.Errorf("refreshDue = %v, want %v", refreshDue, tc.refreshDue)
			}
			// Mount and refresh steps carry the pod's own spec entry, which
			// the plugin is given.
			for _, s := range steps {
				switch s.kind {
				case stepMount, stepRefresh:
					if tc.pod == nil || !specEntry(tc.pod, s.vol) || s.vol.Name != s.name {
						t.Errorf("%s: volume %p (%+v) is not the pod's spec entry of that name", describe(s), s.vol, s.vol)
					}
				default:
					if s.vol != nil {
						t.Errorf("%s: has a volume", describe(s))
					}
				}
			}
		})
	}
}

// specEntry reports whether vol points into the pod's spec.
func specEntry(pod *v1.Pod, vol *v1.Volume) bool {
	for i := range pod.Spec.Volumes {
		if &pod.Spec.Volumes[i] == vol {
			return true
		}
	}
	return false
}

// TestNextDue: nextDue says when plan next has steps for a pod that did
// not change, so that Run reconciles only then. At the due time plan has
// steps; just before it, and at any time for "never", it has none.
func TestNextDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failedAt := func(d time.Duration) *failure {
		return &failure{err: errors.New("boom"), attempts: 1, retryAt: now.Add(d)}
	}
	never := time.Time{}
	tests := []struct {
		name    string
		pod     *v1.Pod
		cur     actual
		refresh bool
		want    time.Time
	}{
		{name: "all mounted, nothing to refresh", pod: planPod("a", "b"),
			cur: actual{dirsMade: true, mounted: mountedAll("a", "b")}, refresh: true, want: never},
		{name: "failed mount retried after its back-off", pod: planPod("a", "b"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a"), failed: map[string]*failure{"b": failedAt(time.Second)}},
			want: now.Add(time.Second)},
		{name: "the earliest of two failures", pod: planPod("a", "b"),
			cur:  actual{dirsMade: true, mounted: map[string]mounted{}, failed: map[string]*failure{"a": failedAt(3 * time.Second), "b": failedAt(time.Second)}},
			want: now.Add(time.Second)},
		{name: "failure of a volume no container mounts any more", pod: unmountedBy(planPod("a", "b"), "b"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a"), failed: map[string]*failure{"b": failedAt(time.Second)}},
			want: never},
		{name: "pod directories failed: only their retry counts", pod: planPod("a"),
			cur:  actual{podFailure: failedAt(2 * time.Second), failed: map[string]*failure{"a": failedAt(time.Second)}},
			want: now.Add(2 * time.Second)},
		{name: "refresh of a refreshable volume", pod: planPod("a", "cfg"),
			cur: actual{dirsMade: true, mounted: mountedAll("a", "cfg"), refreshAt: now.Add(time.Minute)}, refresh: true,
			want: now.Add(time.Minute)},
		{name: "refreshes off", pod: planPod("a", "cfg"),
			cur: actual{dirsMade: true, mounted: mountedAll("a", "cfg"), refreshAt: now.Add(time.Minute)}, want: never},
		{name: "no refreshable volume", pod: planPod("a", "cfg"),
			cur: actual{dirsMade: true, mounted: mountedBy(plainPlugin(), "a", "cfg")}, refresh: true, want: never},
		{name: "failed release retried", pod: nil,
			cur: actual{dirsMade: true, podFailure: failedAt(time.Second)}, want: now.Add(time.Second)},
		{name: "release: failed mounts do not count", pod: nil,
			cur: actual{dirsMade: true, failed: map[string]*failure{"a": failedAt(time.Second)}}, want: never},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nextDue(tc.pod, tc.cur, tc.refresh)
			if !got.Equal(tc.want) {
				t.Fatalf("nextDue = %v, want %v", got, tc.want)
			}
			p := pass{refresh: tc.refresh}
			if got.IsZero() {
				if steps, _ := plan(tc.pod, tc.cur, now.Add(time.Hour), p); len(steps) > 0 && tc.pod != nil {
					t.Errorf("never due, but plan an hour later has %d steps", len(steps))
				}
				return
			}
			if steps, _ := plan(tc.pod, tc.cur, got, p); len(steps) == 0 {
				t.Error("plan at the due time has no steps")
			}
			if steps, _ := plan(tc.pod, tc.cur, got.Add(-time.Nanosecond), p); len(steps) > 0 {
				t.Errorf("plan before the due time has %d steps", len(steps))
			}
		})
	}
	// A refresh never made is due at once.
	pod := planPod("cfg")
	if got := nextDue(pod, actual{dirsMade: true, mounted: mountedAll("cfg")}, true); got.IsZero() || got.After(now) {
		t.Errorf("never refreshed: nextDue = %v, want a time already past", got)
	}
}
