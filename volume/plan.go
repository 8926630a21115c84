package volume

// This file is the core of the volume manager: the desired and actual
// state of one pod and the decisions made from them, as deterministic
// functions. They take no lock, read no clock (the time comes in as an
// argument), start nothing and call no plugin (but a Refresher's
// RequiresRefresh); they return what the shell (manager.go) must do: the
// steps of a pod's reconciliation, when it is next due, whether its
// volumes are ready, which directories are orphans to release.

import (
	"errors"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volume/internal/hostfs"
)

// actual is the actual state of one pod: what plan reads, and what
// reconcilePod records the outcome of each step in. Its maps and failures
// change only with podEntry.op held.
type actual struct {
	// mounted holds the volumes set up, by name; nil until the first.
	mounted map[string]mounted
	// failed holds the last error of each volume that is not set up; nil
	// until the first.
	failed map[string]*failure
	// podFailure is the last error of an operation on the whole pod
	// (creating or removing its directories).
	podFailure *failure
	dirsMade   bool
	// refreshAt is when the refreshable volumes are next set up again.
	refreshAt time.Time
	// refreshErrs holds the last refresh error of each volume, logged
	// once; nil until the first.
	refreshErrs map[string]string
}

// mounted is a volume set up: its Mount, the plugin that set it up and
// the directory the plugin was given.
type mounted struct {
	mount  Mount
	plugin Plugin
	dir    string
}

// failure is the last error of an operation, how many times in a row it
// failed and when it is next due.
type failure struct {
	err      error
	attempts int
	retryAt  time.Time
}

// due reports whether the operation may run again at now; a nil failure
// always may.
func (f *failure) due(now time.Time) bool { return f == nil || !now.Before(f.retryAt) }

// fail records err as the last failure, due for a retry after the backoff.
func fail(prev *failure, err error, now time.Time) *failure {
	f := &failure{err: err, attempts: 1}
	if prev != nil {
		f.attempts = prev.attempts + 1
	}
	d := retryInitial
	for i := 1; i < f.attempts && d < retryMax; i++ {
		d *= 2
	}
	f.retryAt = now.Add(min(d, retryMax))
	return f
}

// usedVolumes are the pod's volumes that a container mounts (the kubelet
// ignores the others), by name.
func usedVolumes(pod *v1.Pod) map[string]*v1.Volume {
	used := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		for _, vm := range c.VolumeMounts {
			used[vm.Name] = true
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, vm := range c.VolumeMounts {
			used[vm.Name] = true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		for _, vm := range c.VolumeMounts {
			used[vm.Name] = true
		}
	}
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if used[v.Name] {
			vols[v.Name] = v
		}
	}
	return vols
}

// stepKind is what a step of a plan does.
type stepKind uint8

const (
	// stepRefresh sets a mounted volume up again with the latest pod.
	stepRefresh stepKind = iota + 1
	// stepUnmount tears a mounted volume down.
	stepUnmount
	// stepMakeDirs creates the pod's directories; the steps after it run
	// only if it succeeds.
	stepMakeDirs
	// stepMount sets a volume up.
	stepMount
	// stepRelease releases the pod's directory once the volumes it had
	// mounted are torn down: it tears down those found on disk, unmounts
	// the subPaths and removes the directory (Manager.release).
	stepRelease
)

// A step is one operation of a plan, on a volume of the pod or, for
// stepMakeDirs and stepRelease, on its directory.
type step struct {
	kind stepKind
	// name is the volume's name; empty for the steps of the pod directory.
	name string
	// vol is the volume's entry in the pod spec, for stepMount and
	// stepRefresh.
	vol *v1.Volume
}

// A pass says which rules a plan follows.
type pass struct {
	// force ignores the back-off of failures (WaitForPodVolumes' first
	// look, ReleasePod).
	force bool
	// refresh sets up again the refreshable volumes when the pod's refresh
	// is due (Run's passes, when RefreshPeriod is positive).
	refresh bool
}

// plan decides what one reconciliation of a pod does, from its desired
// state (pod, nil when the pod should not run) and its actual state (cur)
// at now. It does no I/O and changes nothing; of the plugins it calls only
// the RequiresRefresh method of Refreshers. reconcilePod carries out the
// steps in order.
//
// A pod that should not run is released: each mounted volume unmounted,
// then its directory (stepRelease); unless its last release failed and
// is not due for a retry.
//
// For a pod that should run:
//   - when p.refresh is set and the pod's refresh is due (refreshDue), each
//     mounted volume whose plugin is a Refresher that RequiresRefresh it is
//     refreshed, in the order of the pod spec;
//   - each mounted volume that no container mounts any more is unmounted;
//   - the pod's directories are made if they are not, unless making them
//     failed and is not due for a retry, in which case the plan ends here;
//   - each volume that a container mounts (usedVolumes) and that is not
//     mounted is mounted, unless its last set-up failed and is not due for
//     a retry.
//
// A failure is due for a retry once its back-off has passed, or at once
// when p.force is set. The unmount and mount steps are each sorted by
// name.
func plan(pod *v1.Pod, cur actual, now time.Time, p pass) (steps []step, refreshDue bool) {
	if pod == nil {
		if !p.force && !cur.podFailure.due(now) {
			return nil, false
		}
		steps = make([]step, 0, len(cur.mounted)+1)
		for name := range cur.mounted {
			steps = append(steps, step{kind: stepUnmount, name: name})
		}
		sortSteps(steps)
		return append(steps, step{kind: stepRelease}), false
	}
	want := usedVolumes(pod)
	refreshDue = p.refresh && !now.Before(cur.refreshAt)
	// Room for every step, allocated at the first.
	l := stepList{room: len(cur.mounted) + 1 + len(want)}
	if refreshDue {
		l.room += len(pod.Spec.Volumes)
		for i := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[i]
			mv, ok := cur.mounted[vol.Name]
			if r, isRefresher := mv.plugin.(Refresher); ok && isRefresher && r.RequiresRefresh(vol) {
				l.add(step{kind: stepRefresh, name: vol.Name, vol: vol})
			}
		}
	}
	first := len(l.steps)
	for name := range cur.mounted {
		if want[name] == nil {
			l.add(step{kind: stepUnmount, name: name})
		}
	}
	sortSteps(l.steps[first:])
	if !cur.dirsMade {
		if !p.force && !cur.podFailure.due(now) {
			return l.steps, refreshDue
		}
		l.add(step{kind: stepMakeDirs})
	}
	first = len(l.steps)
	for name, vol := range want {
		if _, done := cur.mounted[name]; done || (!p.force && !cur.failed[name].due(now)) {
			continue
		}
		l.add(step{kind: stepMount, name: name, vol: vol})
	}
	sortSteps(l.steps[first:])
	return l.steps, refreshDue
}

// stepList is a plan being made: its slice is allocated at the first
// step, with room for all, so that a plan with nothing to do has none.
type stepList struct {
	steps []step
	room  int
}

func (l *stepList) add(s step) {
	if l.steps == nil {
		l.steps = make([]step, 0, l.room)
	}
	l.steps = append(l.steps, s)
}

// sortSteps sorts steps by volume name.
func sortSteps(steps []step) {
	slices.SortFunc(steps, func(a, b step) int { return strings.Compare(a.name, b.name) })
}

// nextDue is when plan, given the same pod and actual state, has steps to
// take that it has not now: a failed operation's retry, or the refresh of
// a mounted volume whose plugin asks for refreshes (when refresh is set).
// Zero means never: until the pod or its state changes, plan has nothing
// more to do. It may be earlier than needed, never later.
func nextDue(pod *v1.Pod, cur actual, refresh bool) time.Time {
	var t time.Time
	earliest := func(u time.Time) {
		if t.IsZero() || u.Before(t) {
			t = u
		}
	}
	switch {
	case pod == nil || !cur.dirsMade:
		// Releasing the pod, or making its directories, is all plan does
		// until it succeeds.
		if cur.podFailure != nil {
			earliest(cur.podFailure.retryAt)
		}
		return t
	}
	if len(cur.failed) > 0 {
		want := usedVolumes(pod)
		for name, f := range cur.failed {
			if _, done := cur.mounted[name]; !done && want[name] != nil {
				earliest(f.retryAt)
			}
		}
	}
	if refresh {
		for i := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[i]
			mv, ok := cur.mounted[vol.Name]
			if r, isRefresher := mv.plugin.(Refresher); ok && isRefresher && r.RequiresRefresh(vol) {
				if cur.refreshAt.IsZero() {
					// Never refreshed: due at once (the zero time means
					// never here).
					earliest(time.Unix(0, 1))
				} else {
					earliest(cur.refreshAt)
				}
				break
			}
		}
	}
	return t
}

// The outcomes of the steps. reconcilePod records each in the pod's actual
// state as it comes; what they return tells the shell what to log.

// setUpDone records the set-up of volume name: done as mv, or failed
// with err. It reports whether err is news, a failure of another error than
// the last one (nil or not), which is logged once.
func (a *actual) setUpDone(name string, mv mounted, err error, now time.Time) (news bool) {
	prev := a.failed[name]
	if err != nil {
		if a.failed == nil {
			a.failed = map[string]*failure{}
		}
		a.failed[name] = fail(prev, err, now)
		return changed(prev, err)
	}
	if a.mounted == nil {
		a.mounted = map[string]mounted{}
	}
	a.mounted[name] = mv
	delete(a.failed, name)
	return false
}

// tearDownDone records that volume name is torn down.
func (a *actual) tearDownDone(name string) { delete(a.mounted, name) }

// makeDirsDone records the making of the pod's directories, failed with
// err or not. It reports whether err is news (see setUpDone).
func (a *actual) makeDirsDone(err error, now time.Time) (news bool) {
	prev := a.podFailure
	if err != nil {
		a.podFailure = fail(prev, err, now)
		return changed(prev, err)
	}
	a.podFailure, a.dirsMade = nil, true
	return false
}

// released records a release of the pod's directory (Manager.release):
// gone when the directory is gone or, for a pod UID that is no name, can
// never have been made; err is the release's error. A directory gone
// without error takes the failures of its volumes with it.
func (a *actual) released(gone bool, err error) {
	if !gone {
		return
	}
	a.dirsMade = false
	if err == nil {
		clear(a.failed)
	}
}

// releaseDone records the outcome of a stepRelease.
func (a *actual) releaseDone(gone bool, err error, now time.Time) {
	a.released(gone, err)
	if err != nil {
		a.podFailure = fail(a.podFailure, err, now)
	} else {
		a.podFailure = nil
	}
}

// refreshDone records the refresh of volume name, failed with err or not.
// It reports whether err is news: a failed refresh keeps the volume as it
// was, and its error is logged once.
func (a *actual) refreshDone(name string, err error) (news bool) {
	if err == nil {
		delete(a.refreshErrs, name)
		return false
	}
	prev, had := a.refreshErrs[name]
	if a.refreshErrs == nil {
		a.refreshErrs = map[string]string{}
	}
	a.refreshErrs[name] = err.Error()
	return !had || prev != err.Error()
}

// changed reports whether err differs from the last failure, prev.
func changed(prev *failure, err error) bool {
	return prev == nil || prev.err.Error() != err.Error()
}

// idle reports whether the Manager may forget a pod: not desired, nothing
// set up, no directory, no failure to retry.
func idle(pod *v1.Pod, cur actual) bool {
	return pod == nil && len(cur.mounted) == 0 && !cur.dirsMade && cur.podFailure == nil
}

// releaseErr is the error ReleasePod returns after its reconciliation: the
// failure of the release, while the pod is still undesired.
func releaseErr(pod *v1.Pod, cur actual) error {
	if pod != nil || cur.podFailure == nil {
		return nil
	}
	return cur.podFailure.err
}

// ready returns the pod's mounts when its directories are made and every
// volume a container mounts is set up; else the WaitError saying what is
// missing (without Err, which is the waiting's own).
func ready(pod *v1.Pod, cur actual) (map[string]Mount, *WaitError) {
	want := usedVolumes(pod)
	werr := &WaitError{Pod: podRef(pod), Errs: map[string]error{}}
	if !cur.dirsMade {
		werr.PodErr = errors.New("volume: the pod directory is not created yet")
		if cur.podFailure != nil {
			werr.PodErr = cur.podFailure.err
		}
	}
	mounts := make(map[string]Mount, len(want))
	for name := range want {
		mv, ok := cur.mounted[name]
		if !ok {
			werr.Unmounted = append(werr.Unmounted, name)
			if f := cur.failed[name]; f != nil {
				werr.Errs[name] = f.err
			}
			continue
		}
		mounts[name] = mv.mount
	}
	if werr.PodErr == nil && len(werr.Unmounted) == 0 {
		return mounts, nil
	}
	slices.Sort(werr.Unmounted)
	return nil, werr
}

// Run's schedule: a pass over every pod each ReconcilePeriod (full), and
// between two, passes over the pods that changed or are due.

// scansAll reports whether Run's pass at now looks at every pod (a full
// pass, or the earliest due time, nextDue, has come) rather than at the
// pods that changed alone.
func scansAll(full bool, nextDue, now time.Time) bool {
	return full || (!nextDue.IsZero() && !now.Before(nextDue))
}

// picks reports whether Run's pass at now reconciles a pod it looks at:
// every pod on a full pass, else a pod whose desired state changed (dirty)
// or whose due time has come.
func picks(full, dirty bool, due, now time.Time) bool {
	return full || dirty || (!due.IsZero() && !now.Before(due))
}

// earlier returns the earlier of two due times, the zero time meaning
// never.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// orphanScan is what a CleanupOrphans that read the pods directory saw.
type orphanScan struct {
	at time.Time
	// desired is the desired pods, as a fingerprint: the scan holds no
	// UID of them, which outlive the pods until the next scan otherwise.
	desired podSet
	// clean: no orphaned directory was left (none found, or all removed).
	clean bool
}

// podSet is the fingerprint of a set of pod UIDs: how many, and the sum
// and the exclusive or of their hashes. Two sets with the same fingerprint
// are taken as the same; a collision skips one scan of the pods directory,
// which the next full one (ReconcilePeriod) makes good.
type podSet struct {
	n        int
	sum, xor uint64
}

// fingerprint returns the podSet of the keys of m.
func fingerprint(m map[types.UID]bool) podSet {
	s := podSet{n: len(m)}
	for uid := range m {
		// FNV-1a, 64 bits.
		v := uint64(14695981039346656037)
		for i := 0; i < len(uid); i++ {
			v ^= uint64(uid[i])
			v *= 1099511628211
		}
		s.sum += v
		s.xor ^= v
	}
	return s
}

// covers reports whether a CleanupOrphans at now with desired pods may
// skip reading the pods directory: the last scan left no orphan, saw the
// same desired pods and is younger than period.
func (s orphanScan) covers(desired map[types.UID]bool, now time.Time, period time.Duration) bool {
	return s.clean && now.Sub(s.at) < period && fingerprint(desired) == s.desired
}

// orphanCandidate reports whether the directory of uid under the pods
// directory may be an orphan: its pod is not desired, and its name is a
// pod UID the Manager could have made. It is one unless the Manager knows
// the pod (claimed).
func orphanCandidate(uid types.UID, desired map[types.UID]bool) bool {
	return !desired[uid] && CheckName("pod UID", string(uid)) == nil
}

// claimed reports whether the Manager knows a pod, so that its directory
// is no orphan: the pod is desired, or has volumes set up (it is being
// released).
func claimed(pod *v1.Pod, cur actual) bool { return pod != nil || len(cur.mounted) > 0 }

// orphanFate is what became of an orphan's directory that CleanupOrphans
// released.
type orphanFate uint8

const (
	// orphanRemoved: the directory is gone.
	orphanRemoved orphanFate = iota
	// orphanKept: something no plugin set up is mounted under it; it is
	// kept, and said once (per distinct error).
	orphanKept
	// orphanFailed: releasing it failed; CleanupOrphans returns the error.
	orphanFailed
)

// judgeOrphan says what became of an orphan released with err, and
// whether to log it: a removal always, a kept directory when err is not
// the one logged last for it (logged, empty for none).
func judgeOrphan(err error, logged string) (fate orphanFate, log bool) {
	switch {
	case err == nil:
		return orphanRemoved, true
	case errors.Is(err, hostfs.ErrMounted):
		return orphanKept, logged != err.Error()
	}
	return orphanFailed, false
}
