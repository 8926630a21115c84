package podruntime

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

// restartManager replaces the fakes' manager with a fresh one over the same
// runtime, as an agent restarted.
func (f *fakes) restartManager(t *testing.T) {
	t.Helper()
	m, err := New(f.rec, f.is, f.m.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
}

// age moves the newest instance of the container's start and exit d into
// the past.
func (f *fakes) age(pod *v1.Pod, name string, d time.Duration) {
	c := f.container(pod, name)
	f.rs.Lock()
	defer f.rs.Unlock()
	c.StartedAt -= d.Nanoseconds()
	c.FinishedAt -= d.Nanoseconds()
}

// crashLoop makes the container exit right after each start until the
// manager backs it off by max: it returns once a start is refused with a
// back-off of max, at the container's last exit.
func crashLoop(t *testing.T, f *fakes, name string, max time.Duration) {
	t.Helper()
	pod := testPod("crash", name)
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		time.Sleep(time.Second)
		f.exit(pod, name, 1)
		for {
			res := f.sync(t, pod)
			if len(startedNames(res)) == 1 {
				break
			}
			if !errors.Is(res.Err(), ErrCrashLoopBackOff) {
				t.Fatalf("sync: %v, want a start or CrashLoopBackOff", res.Err())
			}
			if want := fmt.Sprintf("back-off %s restarting", max); len(startResult(res, name).Message) > len(want) && startResult(res, name).Message[:len(want)] == want {
				return
			}
			time.Sleep(time.Until(res.NextRetry()))
		}
	}
	t.Fatalf("no back-off of %v after 20 crashes", max)
}

// A container at the maximum back-off is not restarted by a fresh manager
// (an agent restarted) before its back-off ends: the manager seeds it from
// the runtime's record of the container, and the loop goes on doubling
// from there.
func TestRestartBackOffSurvivesManagerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := testPod("crash", "a")
		crashLoop(t, f, "a", 300*time.Second)
		exited := time.Now()

		time.Sleep(20 * time.Second)
		f.restartManager(t)
		res := f.sync(t, pod)
		if got := startedNames(res); len(got) != 0 {
			t.Fatalf("a fresh manager restarted %v 20s into a back-off of 300s", got)
		}
		if !errors.Is(res.Err(), ErrCrashLoopBackOff) || !res.OnlyBackOff() {
			t.Fatalf("fresh manager: err = %v, want CrashLoopBackOff", res.Err())
		}
		if want := "back-off 5m0s restarting failed container=a pod=crash_default(crash-uid)"; startResult(res, "a").Message != want {
			t.Errorf("message = %q, want %q", startResult(res, "a").Message, want)
		}
		if got, want := res.NextRetry(), exited.Add(300*time.Second); !got.Equal(want) {
			t.Errorf("NextRetry = %v, want %v (the exit plus 300s)", got, want)
		}
		time.Sleep(time.Until(exited.Add(299 * time.Second)))
		if got := startedNames(f.sync(t, pod)); len(got) != 0 {
			t.Fatalf("restarted %v a second before the back-off ended", got)
		}
		time.Sleep(time.Second)
		if got := startedNames(f.sync(t, pod)); len(got) != 1 {
			t.Fatal("not restarted once the back-off ended")
		}
		// The next crash waits 300s again, not 10s.
		time.Sleep(time.Second)
		f.exit(pod, "a", 1)
		if got := startResult(f.sync(t, pod), "a").Message; got != "back-off 5m0s restarting failed container=a pod=crash_default(crash-uid)" {
			t.Errorf("next crash after the restart: message %q, want a back-off of 5m0s", got)
		}
	})
}

// The seeded back-off is the one a manager that ran all along holds: it
// follows the restart count, and a container that ran for Reset or longer
// restarts at once, as it would have.
func TestRestartBackOffSeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := testPod("crash", "a")
		crashLoop(t, f, "a", 40*time.Second)
		f.restartManager(t)
		res := f.sync(t, pod)
		if want := "back-off 40s restarting failed container=a pod=crash_default(crash-uid)"; startResult(res, "a").Message != want {
			t.Fatalf("fresh manager at 40s: results %+v, want message %q", res.Results, want)
		}
		time.Sleep(time.Until(res.NextRetry()))
		if got := startedNames(f.sync(t, pod)); len(got) != 1 {
			t.Fatal("not restarted once the back-off ended")
		}

		// A run of 11 minutes resets the back-off: a fresh manager
		// restarts the container at once.
		time.Sleep(11 * time.Minute)
		f.exit(pod, "a", 1)
		f.restartManager(t)
		if got := startedNames(f.sync(t, pod)); len(got) != 1 {
			t.Fatalf("not restarted at once after a run of 11m: %v", got)
		}
	})
}
