package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestPlan(t *testing.T) {
	const log = "/logs/c/0.log"
	for _, tc := range []struct {
		name     string
		size     int64
		maxFiles int
		siblings []string
		want     Step
	}{{
		name: "within the size: nothing",
		size: 10, siblings: []string{log + ".20260101-000000"},
	}, {
		name: "first rotation",
		size: 11, maxFiles: 5,
		want: Step{Rotate: true},
	}, {
		name: "older rotated files are compressed, the newest rotation stays plain until the next",
		size: 11, maxFiles: 5,
		siblings: []string{log + ".20260101-000000.gz", log + ".20260101-000100"},
		want:     Step{Compress: []string{log + ".20260101-000100"}, Rotate: true},
	}, {
		name: "beyond maxFiles-2 rotated files the oldest go; leftovers of a crash go",
		size: 11, maxFiles: 4,
		siblings: []string{
			log + ".20260101-000000.gz", log + ".20260101-000100.gz", log + ".20260101-000200.gz",
			log + ".20260101-000300", log + ".20260101-000200", log + ".20260101-000400.gz.tmp",
			"/logs/c/1.log.20260101-000000",
		},
		want: Step{
			Remove:   []string{log + ".20260101-000200", log + ".20260101-000400.gz.tmp", log + ".20260101-000000.gz", log + ".20260101-000100.gz"},
			Compress: []string{log + ".20260101-000300"},
			Rotate:   true,
		},
	}, {
		name: "rotations within one second are ordered by their count, compressed or not",
		size: 11, maxFiles: 4,
		siblings: []string{
			log + ".20260101-000000.10", log + ".20260101-000000.2.gz", log + ".20260101-000000.gz",
			log + ".20260101-000000.9.gz", log + ".20260101-000001",
		},
		want: Step{
			Remove:   []string{log + ".20260101-000000.gz", log + ".20260101-000000.2.gz", log + ".20260101-000000.9.gz"},
			Compress: []string{log + ".20260101-000000.10", log + ".20260101-000001"},
			Rotate:   true,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(log, tc.size, 10, tc.maxFiles, tc.siblings)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

type fakeRuntime struct {
	logs     map[string]string // container → log path
	reopened []string
	refuse   bool
	statuses map[string]int // container → ContainerStatus calls
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var out []*runtimeapi.Container
	for id := range f.logs {
		out = append(out, &runtimeapi.Container{Id: id})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int { return strings.Compare(a.Id, b.Id) })
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	if f.statuses == nil {
		f.statuses = map[string]int{}
	}
	f.statuses[id]++
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, LogPath: f.logs[id]}}, nil
}

func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	if f.refuse {
		return errors.New("reopen refused")
	}
	f.reopened = append(f.reopened, id)
	// The runtime creates the log afresh.
	return os.WriteFile(f.logs[id], nil, 0o644)
}

func dir(t *testing.T, d string) []string {
	t.Helper()
	es, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestRotator: a log over MaxSize is rotated with the time as suffix and
// reopened; at the next rotation the previous one is compressed; at most
// MaxFiles files remain; a refused reopen puts the log back.
func TestRotator(t *testing.T) {
	d := t.TempDir()
	log := filepath.Join(d, "0.log")
	rt := &fakeRuntime{logs: map[string]string{"c1": log}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, err := New(rt, Options{MaxFiles: 3, MaxSize: resource.MustParse("1Ki"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1025)
	write := func() {
		if err := os.WriteFile(log, []byte(big), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write()
	if err := r.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.log", "0.log.20260101-000000"}, dir(t, d)); diff != "" {
		t.Errorf("after the first rotation (-want +got):\n%s", diff)
	}
	// Within the size: nothing happens.
	if err := r.RotateAll(t.Context()); err != nil || len(rt.reopened) != 1 {
		t.Fatalf("second pass: %v, reopened %v", err, rt.reopened)
	}
	for i := 1; i <= 3; i++ {
		clk.Step(time.Minute)
		write()
		if err := r.RotateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// MaxFiles 3: the log, one compressed and the newest rotated.
	want := []string{"0.log", "0.log.20260101-000200.gz", "0.log.20260101-000300"}
	if diff := cmp.Diff(want, dir(t, d)); diff != "" {
		t.Errorf("after four rotations (-want +got):\n%s", diff)
	}
	f, err := os.Open(filepath.Join(d, "0.log.20260101-000200.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(zr); err != nil || string(b) != big {
		t.Errorf("compressed log: %d bytes, %v; want the rotated content", len(b), err)
	}
	rt.refuse = true
	clk.Step(time.Minute)
	write()
	if err := r.RotateAll(t.Context()); err == nil || !strings.Contains(err.Error(), "reopen refused") {
		t.Errorf("refused reopen: err %v", err)
	}
	if st, err := os.Stat(log); err != nil || st.Size() != int64(len(big)) {
		t.Errorf("the log was not put back: %v", err)
	}
}

func TestNewNeedsReopen(t *testing.T) {
	type plain struct{ Runtime }
	if _, err := New(plain{}, Options{}); err == nil {
		t.Error("New accepted a runtime that cannot reopen logs")
	}
	if _, err := New(&fakeRuntime{}, Options{MaxFiles: 1}); err == nil {
		t.Error("New accepted MaxFiles 1")
	}
}

// TestRotatorAsksStatusOfNewContainersOnly: a pass reads the status (the
// log path) of the containers the previous pass did not list, and forgets
// the containers that are gone.
func TestRotatorAsksStatusOfNewContainersOnly(t *testing.T) {
	d := t.TempDir()
	rt := &fakeRuntime{logs: map[string]string{"c1": filepath.Join(d, "1.log"), "c2": filepath.Join(d, "2.log")}}
	r, err := New(rt, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.RotateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	delete(rt.logs, "c1")
	rt.logs["c3"] = filepath.Join(d, "3.log")
	if err := r.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"c1": 1, "c2": 1, "c3": 1}, rt.statuses); diff != "" {
		t.Errorf("ContainerStatus calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"c2": rt.logs["c2"], "c3": rt.logs["c3"]}, knownPaths(r)); diff != "" {
		t.Errorf("remembered paths (-want +got):\n%s", diff)
	}
}

// listingRuntime is a fakeRuntime that tells the log paths of some of its
// containers (LogPathLister).
type listingRuntime struct {
	*fakeRuntime
	listed map[string]string
	asked  int
}

func (l *listingRuntime) RunningLogPaths() (map[string]string, bool) {
	l.asked++
	return l.listed, l.listed != nil
}

func TestRotatorUsesListedLogPaths(t *testing.T) {
	d := t.TempDir()
	big := make([]byte, 2048)
	logs := writeLogs(t, d, big, "c1", "c2", "c3")
	rt := &listingRuntime{
		fakeRuntime: &fakeRuntime{logs: logs},
		// c1 and c2 as the runtime has them; c3 not listed.
		listed: map[string]string{"c1": logs["c1"], "c2": logs["c2"]},
	}
	r, err := New(rt, Options{MaxSize: resource.MustParse("1Ki")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"c3": 1}, rt.statuses); diff != "" {
		t.Errorf("ContainerStatus calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c1", "c2", "c3"}, rt.reopened); diff != "" {
		t.Errorf("logs rotated (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(logs, knownPaths(r)); diff != "" {
		t.Errorf("remembered paths (-want +got):\n%s", diff)
	}
	// A pass over the same containers asks nobody.
	if err := r.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rt.asked != 1 {
		t.Errorf("log paths asked %d times, want once", rt.asked)
	}
	if diff := cmp.Diff(map[string]int{"c3": 1}, rt.statuses); diff != "" {
		t.Errorf("ContainerStatus calls after a second pass (-want +got):\n%s", diff)
	}
}

// knownPaths is the log path of each container the rotator knows.
func knownPaths(r *Rotator) map[string]string {
	out := map[string]string{}
	for id, st := range r.logs {
		out[id] = st.path
	}
	return out
}

// watching starts the rotator's watcher, or skips the test where files
// cannot be watched.
func watching(t *testing.T, r *Rotator) {
	t.Helper()
	if err := r.startWatching(); err != nil {
		t.Skipf("files cannot be watched here: %v", err)
	}
	t.Cleanup(r.stopWatching)
}

// pass runs one RotateAll and returns how many logs it checked.
func pass(t *testing.T, r *Rotator) int {
	t.Helper()
	before := r.checked
	if err := r.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r.checked - before
}

func appendTo(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
}

// TestRotatorChecksWrittenLogsOnly: while watching, a pass checks the
// logs written since the last one (and rotates the one that outgrew
// MaxSize within that pass), not the others; every Resync it checks all.
func TestRotatorChecksWrittenLogsOnly(t *testing.T) {
	d := t.TempDir()
	logs := writeLogs(t, d, nil, "c1", "c2", "c3")
	rt := &fakeRuntime{logs: logs}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, err := New(rt, Options{MaxSize: resource.MustParse("1Ki"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	watching(t, r)
	if got := pass(t, r); got != 3 {
		t.Errorf("first pass checked %d logs, want 3", got)
	}
	if got := pass(t, r); got != 0 {
		t.Errorf("pass without writes checked %d logs, want 0", got)
	}
	appendTo(t, logs["c2"], 10)
	if got := pass(t, r); got != 1 {
		t.Errorf("pass after a small write checked %d logs, want 1", got)
	}
	if got := pass(t, r); got != 0 {
		t.Errorf("pass after that checked %d logs, want 0", got)
	}
	// c1 outgrows MaxSize: rotated in the next pass.
	appendTo(t, logs["c1"], 2048)
	clk.Step(DefaultPeriod)
	if got := pass(t, r); got != 1 {
		t.Errorf("pass after c1 outgrew MaxSize checked %d logs, want 1", got)
	}
	if diff := cmp.Diff([]string{"c1"}, rt.reopened); diff != "" {
		t.Errorf("logs rotated (-want +got):\n%s", diff)
	}
	// The rotation renamed the watched file: the new log (the runtime
	// reopened it) is checked and watched at the next pass, and written
	// to after that, rotated again.
	if got := pass(t, r); got != 1 {
		t.Errorf("pass after the rotation checked %d logs, want 1", got)
	}
	appendTo(t, logs["c1"], 2048)
	clk.Step(DefaultPeriod)
	pass(t, r)
	if diff := cmp.Diff([]string{"c1", "c1"}, rt.reopened); diff != "" {
		t.Errorf("logs rotated after the second write (-want +got):\n%s", diff)
	}
	pass(t, r)
	if got := pass(t, r); got != 0 {
		t.Errorf("pass without writes checked %d logs, want 0", got)
	}
	clk.Step(DefaultResync)
	if got := pass(t, r); got != 3 {
		t.Errorf("resync pass checked %d logs, want 3", got)
	}
	if got := pass(t, r); got != 0 {
		t.Errorf("pass after the resync checked %d logs, want 0", got)
	}
}

// TestRotatorWithoutWatchingChecksEveryLog: without a watcher (RotateAll
// called alone), on a file system that does not tell of writes, or out of
// watches, every log is checked every pass.
func TestRotatorWithoutWatchingChecksEveryLog(t *testing.T) {
	d := t.TempDir()
	logs := writeLogs(t, d, nil, "c1", "c2")
	fi, err := os.Stat(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(*Rotator)
	}{
		{"no watcher", func(*Rotator) {}},
		{"file system without notifications", func(r *Rotator) {
			watching(t, r)
			dev, ok := device(fi)
			if !ok {
				t.Skip("no device number here")
			}
			r.notifying[dev] = false
		}},
		{"no watch left", func(r *Rotator) { r.w = &fakeWatcher{err: errWatchesExhausted} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(&fakeRuntime{logs: logs}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(r)
			for i := range 3 {
				if got := pass(t, r); got != 2 {
					t.Errorf("pass %d checked %d logs, want 2", i, got)
				}
			}
		})
	}
}

// fakeWatcher is a watcher whose add fails with err, or reports events
// and overflows as set.
type fakeWatcher struct {
	err      error
	next     int32
	events   []int32
	overflow bool
	removed  []int32
}

func (f *fakeWatcher) add(string, bool) (int32, error) {
	if f.err != nil {
		return 0, f.err
	}
	f.next++
	return f.next, nil
}
func (f *fakeWatcher) remove(wd int32) { f.removed = append(f.removed, wd) }
func (f *fakeWatcher) read(fn func(int32)) (bool, error) {
	for _, wd := range f.events {
		fn(wd)
	}
	f.events = nil
	o := f.overflow
	f.overflow = false
	return o, nil
}
func (f *fakeWatcher) close() error                   { return nil }
func (f *fakeWatcher) wait(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// TestRotatorOverflowChecksEveryLog: when the kernel dropped events, the
// next pass checks every log; a fired watch checks its log; the watch of a
// container gone is removed.
func TestRotatorOverflowChecksEveryLog(t *testing.T) {
	d := t.TempDir()
	logs := writeLogs(t, d, nil, "c1", "c2", "c3")
	rt := &fakeRuntime{logs: logs}
	r, err := New(rt, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &fakeWatcher{}
	r.w = w
	if got := pass(t, r); got != 3 {
		t.Fatalf("first pass checked %d logs, want 3", got)
	}
	if got := pass(t, r); got != 0 {
		t.Errorf("quiet pass checked %d logs, want 0", got)
	}
	w.events = []int32{r.logs["c2"].watch, 999}
	if got := pass(t, r); got != 1 {
		t.Errorf("pass after one event checked %d logs, want 1", got)
	}
	w.overflow = true
	if got := pass(t, r); got != 3 {
		t.Errorf("pass after an overflow checked %d logs, want 3", got)
	}
	gone := r.logs["c3"].watch
	delete(rt.logs, "c3")
	pass(t, r)
	if !slices.Contains(w.removed, gone) {
		t.Errorf("the watch of a container gone was not removed: removed %v", w.removed)
	}
	if _, ok := r.byWatch[gone]; ok {
		t.Error("the watch of a container gone is still mapped")
	}
}

// countingRuntime is a fakeRuntime with a ChangeCounter.
type countingRuntime struct {
	*fakeRuntime
	count  uint64
	ok     bool
	listed int
}

func (c *countingRuntime) RunningContainersChanges() (uint64, bool) { return c.count, c.ok }

func (c *countingRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	c.listed++
	return c.fakeRuntime.ListContainers(ctx, f)
}

// TestRotatorListsOnChange: with a ChangeCounter, a pass lists the
// containers only when the count moved or cannot be told, and at a resync.
func TestRotatorListsOnChange(t *testing.T) {
	d := t.TempDir()
	rt := &countingRuntime{fakeRuntime: &fakeRuntime{logs: map[string]string{"c1": filepath.Join(d, "1.log")}}, ok: true}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, err := New(rt, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r.w = &fakeWatcher{}
	pass(t, r)
	pass(t, r)
	if rt.listed != 1 {
		t.Errorf("listed %d times over two passes without change, want 1", rt.listed)
	}
	rt.count++
	rt.logs["c2"] = filepath.Join(d, "2.log")
	pass(t, r)
	if rt.listed != 2 || len(r.logs) != 2 {
		t.Errorf("after a change: listed %d times, %d logs known; want 2, 2", rt.listed, len(r.logs))
	}
	rt.ok = false
	pass(t, r)
	if rt.listed != 3 {
		t.Errorf("count not told: listed %d times, want 3", rt.listed)
	}
	rt.ok = true
	pass(t, r)
	pass(t, r)
	if rt.listed != 4 {
		t.Errorf("count told again: listed %d times, want 4", rt.listed)
	}
	clk.Step(DefaultResync)
	pass(t, r)
	if rt.listed != 5 {
		t.Errorf("resync: listed %d times, want 5", rt.listed)
	}
}

// TestRotatorWatchesDirectoryOfMissingLog: a log not there yet is not
// checked again until something is created in its directory, or in the
// pod's log directory while the container's is not there either; once it
// is there, its writes are watched.
func TestRotatorWatchesDirectoryOfMissingLog(t *testing.T) {
	podDir := t.TempDir()
	logs := map[string]string{
		"c1": filepath.Join(podDir, "app", "0.log"),
		"c2": filepath.Join(podDir, "side", "0.log"),
	}
	rt := &fakeRuntime{logs: logs}
	r, err := New(rt, Options{MaxSize: resource.MustParse("1Ki")})
	if err != nil {
		t.Fatal(err)
	}
	watching(t, r)
	if got := pass(t, r); got != 2 {
		t.Errorf("first pass checked %d logs, want 2", got)
	}
	if got := pass(t, r); got != 0 {
		t.Errorf("pass without change checked %d logs, want 0", got)
	}
	// The runtime makes app/ and app/0.log: both containers share the pod
	// directory's watch, both are checked once.
	if err := os.Mkdir(filepath.Join(podDir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := pass(t, r); got != 2 {
		t.Errorf("pass after app/ was made checked %d logs, want 2", got)
	}
	if err := os.WriteFile(logs["c1"], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pass(t, r); got != 1 {
		t.Errorf("pass after app/0.log was made checked %d logs, want 1", got)
	}
	if got := pass(t, r); got != 0 {
		t.Errorf("pass without change checked %d logs, want 0", got)
	}
	appendTo(t, logs["c1"], 2048)
	pass(t, r)
	if diff := cmp.Diff([]string{"c1"}, rt.reopened); diff != "" {
		t.Errorf("logs rotated (-want +got):\n%s", diff)
	}
}

// TestRotatorPollsLogWithoutDirectory: a log whose directory and pod
// directory are both missing is checked every pass.
func TestRotatorPollsLogWithoutDirectory(t *testing.T) {
	r, err := New(&fakeRuntime{logs: map[string]string{"c1": filepath.Join(t.TempDir(), "pod", "app", "0.log")}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	watching(t, r)
	for i := range 3 {
		if got := pass(t, r); got != 1 {
			t.Errorf("pass %d checked %d logs, want 1", i, got)
		}
	}
}

// writeLogs writes data to <id>.log in d for each of ids and returns the
// paths by ID.
func writeLogs(t *testing.T, d string, data []byte, ids ...string) map[string]string {
	t.Helper()
	logs := make(map[string]string, len(ids))
	for _, id := range ids {
		logs[id] = filepath.Join(d, id+".log")
		if err := os.WriteFile(logs[id], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return logs
}
