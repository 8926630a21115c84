package podsync

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/volume"
)

// countingRuntime counts the pod syncs that reach the runtime manager.
type countingPodRuntime struct {
	*podruntime.Manager
	mu    sync.Mutex
	syncs int
	opts  podruntime.SyncPodOptions // the last sync's
	// during, when set, runs inside each sync.
	during func()
}

func (r *countingPodRuntime) SyncPodWithOptions(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, opts podruntime.SyncPodOptions) podruntime.SyncResult {
	r.mu.Lock()
	r.syncs++
	r.opts = opts
	during := r.during
	r.mu.Unlock()
	if during != nil {
		during()
	}
	return r.Manager.SyncPodWithOptions(ctx, pod, st, opts)
}

func (r *countingPodRuntime) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs
}

// TestPeriodicSyncSkippedWhenSettled: a periodic sync of a pod whose
// last sync found nothing to do is skipped while its inputs are the same;
// a change of its spec, runtime status or API status, an update, an
// active deadline and the full resync bound each make it sync in full.
// countedProbes are a pod's probe results whose change count the test
// moves.
type countedProbes struct {
	PodProbes
	n atomic.Uint64
}

func (p *countedProbes) Changes() uint64 { return p.n.Load() }

// settleFixture is a Syncer over the in-memory runtime with one pod,
// for the tests of skipped periodic syncs; run inside a synctest bubble.
type settleFixture struct {
	s      *Syncer
	crt    *countingPodRuntime
	probes *countedProbes
	pod    *v1.Pod
	read   func() *runtime.PodStatus
	sync   func(what string, ut podworker.UpdateType, p *v1.Pod, st *runtime.PodStatus, want int)
}

func newSettleFixture(t *testing.T) (*settleFixture, func()) {
	ctx := t.Context()
	dir := t.TempDir()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	rm, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: filepath.Join(dir, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	crt := &countingPodRuntime{Manager: rm}
	statuses := status.NewManager(status.Options{})
	volumes, err := volume.NewManager(dir, volume.Options{})
	if err != nil {
		t.Fatal(err)
	}
	probes, err := probe.NewManager(statuses.GetPodStatus, probe.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	cgroups, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	counted := &countedProbes{PodProbes: probes}
	s, err := New(Config{
		Runtime: crt, Volumes: volumes, Cgroups: cgroups, Probes: counted,
		Statuses: statuses, Cache: pleg.NewCache(), Queue: podworker.NewQueue(),
	})
	if err != nil {
		t.Fatal(err)
	}
	vctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = volumes.Run(vctx); close(done) }()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"},
		}}},
	}
	sources.SetDefaults(pod)
	volumes.AddPod(pod)
	read := func() *runtime.PodStatus {
		t.Helper()
		st, err := rm.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sync := func(what string, ut podworker.UpdateType, p *v1.Pod, st *runtime.PodStatus, want int) {
		t.Helper()
		if _, err := s.SyncPod(ctx, ut, p, st); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := crt.count(); got != want {
			t.Fatalf("%s: %d syncs reached the runtime, want %d", what, got, want)
		}
	}
	return &settleFixture{s: s, crt: crt, probes: counted, pod: pod, read: read, sync: sync}, func() { stop(); <-done; rt.Close() }
}

func TestPeriodicSyncSkippedWhenSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f, cleanup := newSettleFixture(t)
		defer cleanup()
		s, statuses, pod, read, sync := f.s, f.s.c.Statuses.(*status.Manager), f.pod, f.read, f.sync
		sync("create", podworker.SyncPodCreate, pod, read(), 1)
		st := read()
		sync("first sync of the running pod", podworker.SyncPodSync, pod, st, 2)
		sync("periodic sync, nothing changed", podworker.SyncPodSync, pod, st, 2)
		sync("again", podworker.SyncPodSync, pod, st, 2)
		sync("an update", podworker.SyncPodUpdate, pod, st, 3)
		sync("periodic sync after the update", podworker.SyncPodSync, pod, st, 3)

		st = read()
		sync("new runtime status", podworker.SyncPodSync, pod, st, 4)
		sync("settled on it", podworker.SyncPodSync, pod, st, 4)

		edited := pod.DeepCopy()
		edited.Labels = map[string]string{"a": "b"}
		sync("new pod object", podworker.SyncPodSync, edited, st, 5)
		sync("settled on it", podworker.SyncPodSync, edited, st, 5)
		pod = edited

		cur, _ := statuses.GetPodStatus(pod.UID)
		cur.Message = "changed elsewhere"
		statuses.SetPodStatus(pod, cur)
		sync("API status changed", podworker.SyncPodSync, pod, st, 6)
		sync("settled on it", podworker.SyncPodSync, pod, st, 6)

		time.Sleep(fullResyncPeriod)
		sync("full resync bound passed", podworker.SyncPodSync, pod, st, 7)
		sync("settled again", podworker.SyncPodSync, pod, st, 7)

		deadline := pod.DeepCopy()
		deadline.Spec.ActiveDeadlineSeconds = ptrTo(int64(3600))
		sync("pod with a deadline", podworker.SyncPodSync, deadline, st, 8)
		sync("pod with a deadline, nothing changed", podworker.SyncPodSync, deadline, st, 9)

		if err := s.SyncTerminatingPod(ctx, pod, st, 0, nil); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		n := len(s.settled)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d pods settled after the pod terminated, want 0", n)
		}
	})
}

// TestProbeChangeDuringSyncNotLost: a probe result that changes while a
// sync of the pod runs (after the sync read the results) makes the next
// periodic sync run in full, not skip as settled.
func TestProbeChangeDuringSyncNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cleanup := newSettleFixture(t)
		defer cleanup()
		f.sync("create", podworker.SyncPodCreate, f.pod, f.read(), 1)
		st := f.read()
		f.sync("first sync of the running pod", podworker.SyncPodSync, f.pod, st, 2)
		f.sync("periodic sync, nothing changed", podworker.SyncPodSync, f.pod, st, 2)

		f.crt.mu.Lock()
		f.crt.during = func() { f.probes.n.Add(1) }
		f.crt.mu.Unlock()
		f.sync("an update, during which a probe result changes", podworker.SyncPodUpdate, f.pod, st, 3)
		f.crt.mu.Lock()
		f.crt.during = nil
		f.crt.mu.Unlock()
		f.sync("the sync the probe change asked for", podworker.SyncPodSync, f.pod, st, 4)
		f.sync("settled on it", podworker.SyncPodSync, f.pod, st, 4)
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestSyncGivesTheCFSPeriod: a sync gives the runtime manager the CFS
// period of the pod cgroups, which the containers' quotas share.
func TestSyncGivesTheCFSPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cleanup := newSettleFixture(t)
		defer cleanup()
		f.sync("create", podworker.SyncPodCreate, f.pod, f.read(), 1)
		f.crt.mu.Lock()
		got := f.crt.opts.CPUCFSQuotaPeriod
		f.crt.mu.Unlock()
		if got != 100*time.Millisecond {
			t.Fatalf("the sync gave the runtime manager a CFS period of %s, want the pod cgroups' 100ms", got)
		}
	})
}
