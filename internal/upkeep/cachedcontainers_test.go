package upkeep

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestCachedContainers: the running containers come from the PLEG's
// cache while it is current, and every other list from the runtime.
func TestCachedContainers(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	cache := pleg.NewCache()
	c := cachedContainers{RuntimeService: rt, cache: cache}
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	list := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		cs, err := c.ListContainers(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range cs {
			ids = append(ids, x.GetId())
		}
		return ids
	}
	if got := list(running); len(got) != 0 {
		t.Fatalf("from the (empty) runtime: %v", got)
	}
	cache.Set("a", &runtime.PodStatus{ID: "a", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "cached", Name: "app", State: runtime.ContainerStateRunning},
	}}, nil, time.Now())
	if got := list(running); len(got) != 0 {
		t.Fatalf("a cache never refreshed answered: %v", got)
	}
	if _, ok := c.RunningContainersChanges(); ok {
		t.Error("a cache never refreshed told its count of changes")
	}
	cache.UpdateTime(time.Now())
	if got := list(running); !slices.Equal(got, []string{"cached"}) {
		t.Fatalf("from a current cache: %v, want [cached]", got)
	}
	n0, ok := c.RunningContainersChanges()
	if !ok {
		t.Error("a current cache did not tell its count of changes")
	}
	cache.Set("a", &runtime.PodStatus{ID: "a", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "cached", Name: "app", State: runtime.ContainerStateRunning},
	}}, nil, time.Now())
	if n1, _ := c.RunningContainersChanges(); n1 == n0 {
		t.Error("the count of changes did not move when a pod's status was set")
	}
	for _, f := range []*runtimeapi.ContainerFilter{nil, {}, {State: running.State, PodSandboxId: "s"}, {State: running.State, Id: "x"},
		{State: running.State, LabelSelector: map[string]string{"a": "b"}}, {State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}}} {
		if got := list(f); len(got) != 0 {
			t.Fatalf("filter %v answered from the cache: %v", f, got)
		}
	}
	if c.Unwrap() != runtime.RuntimeService(rt) {
		t.Fatal("Unwrap does not give the runtime")
	}
}

// TestRunningLogPaths checks the log paths the log rotator gets from the
// agent: those of the running containers in the PLEG's cache, laid out as
// the runtime manager lays them out, for pods whose log directory is
// there, from a cache current or not.
func TestRunningLogPaths(t *testing.T) {
	logs := t.TempDir()
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: logs})
	if err != nil {
		t.Fatal(err)
	}
	cache := pleg.NewCache()
	cc := cachedContainers{RuntimeService: rt, cache: cache, logPath: m.ContainerLogPath, podLogDir: m.PodLogDir}
	if paths, ok := cc.RunningLogPaths(); !ok || len(paths) != 0 {
		t.Errorf("an empty cache gave %v, %v, want no paths", paths, ok)
	}
	now := time.Now()
	cache.Set("u1", &runtime.PodStatus{ID: "u1", Name: "p1", Namespace: "ns", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c1", Name: "app", State: runtime.ContainerStateRunning, RestartCount: 2},
		{ID: "c0", Name: "init", State: runtime.ContainerStateExited},
	}}, nil, now)
	cache.Set("u2", &runtime.PodStatus{ID: "u2", Name: "p2", Namespace: "ns", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c2", Name: "app", State: runtime.ContainerStateRunning},
	}}, nil, now)
	// A cache not current (a relist behind a start of thousands of pods)
	// still tells the paths of the containers it knows: a container's
	// log path is fixed when it is created.
	cache.UpdateTime(now.Add(-time.Minute))
	// Only p1's log directory is there.
	if err := os.MkdirAll(runtime.PodLogsDirectory(logs, "ns", "p1", "u1"), 0o755); err != nil {
		t.Fatal(err)
	}
	paths, ok := cc.RunningLogPaths()
	if !ok {
		t.Fatal("a cache behind by a minute gave no log paths")
	}
	want := map[string]string{"c1": filepath.Join(logs, "ns_p1_u1", "app", "2.log")}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("log paths (-want +got):\n%s", diff)
	}
}
