package volume

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volume/internal/hostfs"
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

// summary spells an actual state for the tables: the volumes mounted, the
// failures (see describeFailure), the pod's failure, dirs made, the
// refresh errors.
func summary(a actual) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(a.mounted)) {
		parts = append(parts, "mounted "+name)
	}
	for _, name := range slices.Sorted(maps.Keys(a.failed)) {
		parts = append(parts, "failed "+name+" "+describeFailure(a.failed[name]))
	}
	if a.podFailure != nil {
		parts = append(parts, "pod failed "+describeFailure(a.podFailure))
	}
	if a.dirsMade {
		parts = append(parts, "dirs made")
	}
	for _, name := range slices.Sorted(maps.Keys(a.refreshErrs)) {
		parts = append(parts, "refresh of "+name+": "+a.refreshErrs[name])
	}
	return strings.Join(parts, ", ")
}

// describeFailure is "err×attempts", then "in d" where d is the time from
// outcomeNow to the retry, when it has one.
func describeFailure(f *failure) string {
	s := fmt.Sprintf("%v×%d", f.err, f.attempts)
	if !f.retryAt.IsZero() {
		s += fmt.Sprintf(" in %v", f.retryAt.Sub(outcomeNow))
	}
	return s
}

var outcomeNow = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// TestOutcomes: what each step's outcome makes of the actual state, and
// whether its error is news (logged).
func TestOutcomes(t *testing.T) {
	now := outcomeNow
	errA, errB := errors.New("a"), errors.New("b")
	failedOnce := func(err error) *failure { return fail(nil, err, now.Add(-time.Hour)) }
	mv := mountedAll("v")["v"]
	tests := []struct {
		name     string
		cur      actual
		outcome  func(a *actual) bool // returns news, or false
		want     string
		wantNews bool
	}{
		{
			name:    "set-up done",
			cur:     actual{dirsMade: true, failed: map[string]*failure{"v": failedOnce(errA), "w": failedOnce(errA)}},
			outcome: func(a *actual) bool { return a.setUpDone("v", mv, nil, now) },
			want:    "mounted v, failed w a×1 in -59m59.5s, dirs made",
		},
		{
			name:     "set-up failed: news, retried after 500ms",
			cur:      actual{dirsMade: true},
			outcome:  func(a *actual) bool { return a.setUpDone("v", mounted{}, errA, now) },
			want:     "failed v a×1 in 500ms, dirs made",
			wantNews: true,
		},
		{
			name:    "set-up failed again alike: no news, back-off doubles",
			cur:     actual{dirsMade: true, failed: map[string]*failure{"v": {err: errA, attempts: 1}}},
			outcome: func(a *actual) bool { return a.setUpDone("v", mounted{}, errors.New("a"), now) },
			want:    "failed v a×2 in 1s, dirs made",
		},
		{
			name:     "set-up failed otherwise: news",
			cur:      actual{dirsMade: true, failed: map[string]*failure{"v": {err: errA, attempts: 1}}},
			outcome:  func(a *actual) bool { return a.setUpDone("v", mounted{}, errB, now) },
			want:     "failed v b×2 in 1s, dirs made",
			wantNews: true,
		},
		{
			name:    "torn down",
			cur:     actual{dirsMade: true, mounted: mountedAll("v", "w")},
			outcome: func(a *actual) bool { a.tearDownDone("v"); return false },
			want:    "mounted w, dirs made",
		},
		{
			name:    "dirs made",
			cur:     actual{podFailure: failedOnce(errA)},
			outcome: func(a *actual) bool { return a.makeDirsDone(nil, now) },
			want:    "dirs made",
		},
		{
			name:     "dirs failed: news",
			cur:      actual{},
			outcome:  func(a *actual) bool { return a.makeDirsDone(errA, now) },
			want:     "pod failed a×1 in 500ms",
			wantNews: true,
		},
		{
			name:    "dirs failed again alike: no news",
			cur:     actual{podFailure: &failure{err: errA, attempts: 3}},
			outcome: func(a *actual) bool { return a.makeDirsDone(errA, now) },
			want:    "pod failed a×4 in 4s",
		},
		{
			name:    "released: dirs gone, failures forgotten",
			cur:     actual{dirsMade: true, failed: map[string]*failure{"v": failedOnce(errA)}, podFailure: failedOnce(errA)},
			outcome: func(a *actual) bool { a.releaseDone(true, nil, now); return false },
		},
		{
			name:    "release failed: dirs kept, retried after back-off",
			cur:     actual{dirsMade: true, failed: map[string]*failure{"v": {err: errA, attempts: 1}}, podFailure: &failure{err: errB, attempts: 1}},
			outcome: func(a *actual) bool { a.releaseDone(false, errB, now); return false },
			want:    "failed v a×1, pod failed b×2 in 1s, dirs made",
		},
		{
			name:    "release of a pod that can have no directory, a teardown failed: no dirs, failures kept",
			cur:     actual{dirsMade: true, failed: map[string]*failure{"v": {err: errA, attempts: 1}}},
			outcome: func(a *actual) bool { a.releaseDone(true, errB, now); return false },
			want:    "failed v a×1, pod failed b×1 in 500ms",
		},
		{
			name:    "orphan released: the pod failure is not the orphan's",
			cur:     actual{dirsMade: true, podFailure: &failure{err: errB, attempts: 1}},
			outcome: func(a *actual) bool { a.released(true, nil); return false },
			want:    "pod failed b×1",
		},
		{
			name:    "orphan kept",
			cur:     actual{dirsMade: true},
			outcome: func(a *actual) bool { a.released(false, errB); return false },
			want:    "dirs made",
		},
		{
			name:     "refresh failed: news",
			cur:      actual{dirsMade: true, mounted: mountedAll("cfg")},
			outcome:  func(a *actual) bool { return a.refreshDone("cfg", errA) },
			want:     "mounted cfg, dirs made, refresh of cfg: a",
			wantNews: true,
		},
		{
			name:    "refresh failed again alike: no news",
			cur:     actual{dirsMade: true, mounted: mountedAll("cfg"), refreshErrs: map[string]string{"cfg": "a"}},
			outcome: func(a *actual) bool { return a.refreshDone("cfg", errA) },
			want:    "mounted cfg, dirs made, refresh of cfg: a",
		},
		{
			name:     "refresh failed otherwise: news",
			cur:      actual{dirsMade: true, mounted: mountedAll("cfg"), refreshErrs: map[string]string{"cfg": "a"}},
			outcome:  func(a *actual) bool { return a.refreshDone("cfg", errB) },
			want:     "mounted cfg, dirs made, refresh of cfg: b",
			wantNews: true,
		},
		{
			name:    "refresh done: its error forgotten",
			cur:     actual{dirsMade: true, mounted: mountedAll("cfg"), refreshErrs: map[string]string{"cfg": "a"}},
			outcome: func(a *actual) bool { return a.refreshDone("cfg", nil) },
			want:    "mounted cfg, dirs made",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.cur
			news := tc.outcome(&a)
			if diff := cmp.Diff(tc.want, summary(a)); diff != "" {
				t.Errorf("actual state (-want +got):\n%s", diff)
			}
			if news != tc.wantNews {
				t.Errorf("news = %v, want %v", news, tc.wantNews)
			}
		})
	}
}

// TestFail: the back-off of a failed operation, the kubelet's: 500ms,
// doubling, at most 2m2s.
func TestFail(t *testing.T) {
	now := outcomeNow
	var f *failure
	var got []time.Duration
	for range 11 {
		f = fail(f, errors.New("boom"), now)
		got = append(got, f.retryAt.Sub(now))
	}
	want := []time.Duration{
		500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, 64 * time.Second, 122 * time.Second, 122 * time.Second, 122 * time.Second,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("back-offs (-want +got):\n%s", diff)
	}
	if f.attempts != 11 {
		t.Errorf("attempts = %d, want 11", f.attempts)
	}
}

// TestReady: what WaitForPodVolumes learns from a pod's actual state.
func TestReady(t *testing.T) {
	errA := errors.New("a")
	denied := Mark(errors.New("denied"), ErrNotAllowed)
	full := Mark(errors.New("disk full"), ErrPodDirectory)
	tests := []struct {
		name      string
		pod       *v1.Pod
		cur       actual
		want      map[string]Mount // nil: not ready
		unmounted []string
		errs      map[string]error
		podErr    string
		final     bool
	}{
		{
			name: "every volume mounted",
			pod:  planPod("a", "b"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a", "b", "z")},
			want: map[string]Mount{"a": {Name: "a", HostPath: "/x/a"}, "b": {Name: "b", HostPath: "/x/b"}},
		},
		{
			name: "no volume",
			pod:  planPod(),
			cur:  actual{dirsMade: true},
			want: map[string]Mount{},
		},
		{
			name: "a volume no container mounts is not waited for",
			pod:  unmountedBy(planPod("a", "b"), "b"),
			cur:  actual{dirsMade: true, mounted: mountedAll("a")},
			want: map[string]Mount{"a": {Name: "a", HostPath: "/x/a"}},
		},
		{
			name:      "volumes not mounted yet, one failed, sorted",
			pod:       planPod("c", "a", "b"),
			cur:       actual{dirsMade: true, mounted: mountedAll("b"), failed: map[string]*failure{"c": {err: errA}}},
			unmounted: []string{"a", "c"},
			errs:      map[string]error{"c": errA},
		},
		{
			name:      "a permanent failure ends the waiting",
			pod:       planPod("a", "b"),
			cur:       actual{dirsMade: true, failed: map[string]*failure{"a": {err: denied}, "b": {err: errA}}},
			unmounted: []string{"a", "b"},
			errs:      map[string]error{"a": denied, "b": errA},
			final:     true,
		},
		{
			name:      "pod directories not made yet",
			pod:       planPod("a"),
			unmounted: []string{"a"},
			podErr:    "volume: the pod directory is not created yet",
		},
		{
			name:      "pod directories failed",
			pod:       planPod("a"),
			cur:       actual{podFailure: &failure{err: errA}},
			unmounted: []string{"a"},
			podErr:    "a",
		},
		{
			name:   "pod directories cannot be made: the waiting ends",
			pod:    planPod(),
			cur:    actual{podFailure: &failure{err: full}},
			podErr: "disk full",
			final:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts, werr := ready(tc.pod, tc.cur)
			if diff := cmp.Diff(tc.want, mounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
			if tc.want != nil {
				if werr != nil {
					t.Errorf("ready, but WaitError %v", werr)
				}
				return
			}
			if werr == nil {
				t.Fatal("not ready, but no WaitError")
			}
			if werr.Pod != "default/p" || werr.Err != nil {
				t.Errorf("Pod = %q, Err = %v; want default/p, nil", werr.Pod, werr.Err)
			}
			if diff := cmp.Diff(tc.unmounted, werr.Unmounted); diff != "" {
				t.Errorf("Unmounted (-want +got):\n%s", diff)
			}
			if tc.errs == nil {
				tc.errs = map[string]error{}
			}
			if diff := cmp.Diff(tc.errs, werr.Errs, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("Errs (-want +got):\n%s", diff)
			}
			podErr := ""
			if werr.PodErr != nil {
				podErr = werr.PodErr.Error()
			}
			if podErr != tc.podErr {
				t.Errorf("PodErr = %q, want %q", podErr, tc.podErr)
			}
			if werr.final() != tc.final {
				t.Errorf("final = %v, want %v", werr.final(), tc.final)
			}
		})
	}
}

// TestLifetime: when the Manager keeps a pod's entry, says the pod is its
// own, and what ReleasePod returns.
func TestLifetime(t *testing.T) {
	errA := errors.New("a")
	tests := []struct {
		name       string
		pod        *v1.Pod
		cur        actual
		idle       bool
		claimed    bool
		releaseErr error
	}{
		{name: "undesired, nothing left", idle: true},
		{name: "undesired, failures of its volumes only", cur: actual{failed: map[string]*failure{"a": {err: errA}}}, idle: true},
		{name: "desired", pod: planPod(), claimed: true},
		{name: "desired, release failed earlier", pod: planPod(), cur: actual{podFailure: &failure{err: errA}}, claimed: true},
		{name: "undesired, volumes mounted", cur: actual{mounted: mountedAll("a")}, claimed: true},
		{name: "undesired, directory left", cur: actual{dirsMade: true}},
		{name: "undesired, release failed", cur: actual{dirsMade: true, podFailure: &failure{err: errA}}, releaseErr: errA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := idle(tc.pod, tc.cur); got != tc.idle {
				t.Errorf("idle = %v, want %v", got, tc.idle)
			}
			if got := claimed(tc.pod, tc.cur); got != tc.claimed {
				t.Errorf("claimed = %v, want %v", got, tc.claimed)
			}
			if got := releaseErr(tc.pod, tc.cur); got != tc.releaseErr {
				t.Errorf("releaseErr = %v, want %v", got, tc.releaseErr)
			}
		})
	}
}

// TestSchedule: which pods Run's pass at now looks at and reconciles.
func TestSchedule(t *testing.T) {
	now := outcomeNow
	never, past, future := time.Time{}, now.Add(-time.Second), now.Add(time.Second)
	tests := []struct {
		name          string
		full, dirty   bool
		nextDue, due  time.Time
		scans, picked bool
	}{
		{name: "full pass: every pod", full: true, scans: true, picked: true},
		{name: "nothing due: the changed pods only", nextDue: future, due: future},
		{name: "nothing due: a changed pod", nextDue: future, dirty: true, picked: true},
		{name: "nothing ever due", nextDue: never, due: never},
		{name: "a due time came: every pod looked at", nextDue: past, due: future, scans: true},
		{name: "a due time came: the due pod", nextDue: past, due: past, scans: true, picked: true},
		{name: "due exactly now", nextDue: now, due: now, scans: true, picked: true},
		{name: "a due time came: a changed pod", nextDue: now, due: never, dirty: true, scans: true, picked: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scansAll(tc.full, tc.nextDue, now); got != tc.scans {
				t.Errorf("scansAll = %v, want %v", got, tc.scans)
			}
			if got := picks(tc.full, tc.dirty, tc.due, now); got != tc.picked {
				t.Errorf("picks = %v, want %v", got, tc.picked)
			}
		})
	}
	for _, tc := range []struct{ a, b, want time.Time }{
		{never, never, never},
		{never, past, past},
		{future, never, future},
		{past, future, past},
		{future, past, past},
	} {
		if got := earlier(tc.a, tc.b); !got.Equal(tc.want) {
			t.Errorf("earlier(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestOrphans: CleanupOrphans' decisions: whether to read the pods
// directory, which of its entries may be orphans, what became of one.
func TestOrphans(t *testing.T) {
	now := outcomeNow
	desired := map[types.UID]bool{"a": true, "b": true}
	scans := []struct {
		name    string
		scan    orphanScan
		desired map[types.UID]bool
		covers  bool
	}{
		{name: "same pods, clean, recent", scan: orphanScan{at: now.Add(-time.Second), desired: fingerprint(desired), clean: true}, desired: desired, covers: true},
		{name: "never scanned", desired: desired},
		{name: "orphans left", scan: orphanScan{at: now, desired: fingerprint(desired)}, desired: desired},
		{name: "period passed", scan: orphanScan{at: now.Add(-time.Minute), desired: fingerprint(desired), clean: true}, desired: desired},
		{name: "a pod more", scan: orphanScan{at: now, desired: fingerprint(desired), clean: true}, desired: map[types.UID]bool{"a": true, "b": true, "c": true}},
		{name: "other pods", scan: orphanScan{at: now, desired: fingerprint(desired), clean: true}, desired: map[types.UID]bool{"a": true, "c": true}},
		{name: "no pods, again", scan: orphanScan{at: now, desired: fingerprint(map[types.UID]bool{}), clean: true}, covers: true},
	}
	for _, tc := range scans {
		if got := tc.scan.covers(tc.desired, now, time.Minute); got != tc.covers {
			t.Errorf("%s: covers = %v, want %v", tc.name, got, tc.covers)
		}
	}
	for _, tc := range []struct {
		uid  types.UID
		want bool
	}{
		{"a", false}, {"c", true}, {"..", false}, {".", false}, {"", false},
	} {
		if got := orphanCandidate(tc.uid, desired); got != tc.want {
			t.Errorf("orphanCandidate(%q) = %v, want %v", tc.uid, got, tc.want)
		}
	}
	mountedErr := fmt.Errorf("volume: removing the pod directory: %w", hostfs.ErrMounted)
	for _, tc := range []struct {
		name   string
		err    error
		logged string
		fate   orphanFate
		log    bool
	}{
		{name: "removed", fate: orphanRemoved, log: true},
		{name: "removed, kept before", logged: "x", fate: orphanRemoved, log: true},
		{name: "kept: something mounted", err: mountedErr, fate: orphanKept, log: true},
		{name: "kept again alike: said once", err: mountedErr, logged: mountedErr.Error(), fate: orphanKept},
		{name: "kept otherwise", err: mountedErr, logged: "x", fate: orphanKept, log: true},
		{name: "failed", err: errors.New("permission denied"), fate: orphanFailed},
	} {
		fate, log := judgeOrphan(tc.err, tc.logged)
		if fate != tc.fate || log != tc.log {
			t.Errorf("%s: judgeOrphan = %v, %v; want %v, %v", tc.name, fate, log, tc.fate, tc.log)
		}
	}
}
