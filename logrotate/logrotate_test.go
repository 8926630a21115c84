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
	if diff := cmp.Diff(map[string]string{"c2": rt.logs["c2"], "c3": rt.logs["c3"]}, r.paths); diff != "" {
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
	logs := map[string]string{}
	for _, id := range []string{"c1", "c2", "c3"} {
		logs[id] = filepath.Join(d, id+".log")
		if err := os.WriteFile(logs[id], big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
	if diff := cmp.Diff(logs, r.paths); diff != "" {
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
