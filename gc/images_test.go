package gc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func img(id string, size uint64, tags ...string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: tags}
}

func using(imageRef string) *runtimeapi.Container {
	return &runtimeapi.Container{Id: "c-" + imageRef, ImageRef: imageRef, Image: &runtimeapi.ImageSpec{Image: imageRef}}
}

func candidateIDs(cs []ImageCandidate) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestImageRecordsDetect(t *testing.T) {
	r := ImageRecords{}
	images := []*runtimeapi.Image{img("sha256:a", 10, "a:1"), img("sha256:b", 20, "b:1"), {Id: "sha256:p", Pinned: true}}
	byTag := &runtimeapi.Container{Id: "c", Image: &runtimeapi.ImageSpec{Image: "b:1"}}
	inUse := r.Detect(t0, images, []*runtimeapi.Container{using("sha256:a")}, nil)
	if diff := cmp.Diff(map[string]bool{"sha256:a": true}, inUse); diff != "" {
		t.Errorf("in use (-want +got):\n%s", diff)
	}
	if got := r["sha256:a"]; !got.LastUsed.Equal(t0) || !got.FirstDetected.Equal(t0) || got.Size != 10 {
		t.Errorf("record of a = %+v", got)
	}
	if got := r["sha256:b"]; !got.LastUsed.IsZero() {
		t.Errorf("b never used, LastUsed = %v", got.LastUsed)
	}
	if !r["sha256:p"].Pinned {
		t.Errorf("p not pinned")
	}
	// Later: a no longer used, b used by tag, p gone, c new and pinned by
	// name.
	t1 := t0.Add(time.Minute)
	images = []*runtimeapi.Image{img("sha256:a", 10, "a:1"), img("sha256:b", 20, "b:1"), img("sha256:c", 5, "pause:3.10")}
	inUse = r.Detect(t1, images, []*runtimeapi.Container{byTag}, map[string]bool{"pause:3.10": true})
	if diff := cmp.Diff(map[string]bool{"sha256:b": true}, inUse); diff != "" {
		t.Errorf("in use (-want +got):\n%s", diff)
	}
	if got := r["sha256:a"]; !got.LastUsed.Equal(t0) || !got.FirstDetected.Equal(t0) {
		t.Errorf("a keeps its last use: %+v", got)
	}
	if _, ok := r["sha256:p"]; ok {
		t.Errorf("a removed image is still recorded")
	}
	if got := r["sha256:c"]; !got.Pinned || !got.FirstDetected.Equal(t1) {
		t.Errorf("c = %+v, want pinned by name, first detected at t1", got)
	}
}

func TestPlanImages(t *testing.T) {
	const gi = 1 << 30
	// Records, relative to t0.
	rec := func(firstAgo, lastUsedAgo time.Duration, size uint64) *ImageRecord {
		r := &ImageRecord{FirstDetected: t0.Add(-firstAgo), Size: size}
		if lastUsedAgo >= 0 {
			r.LastUsed = t0.Add(-lastUsedAgo)
		}
		return r
	}
	const never = -1
	for _, tc := range []struct {
		name      string
		records   ImageRecords
		inUse     map[string]bool
		fs        FsStats
		policy    ImagePolicy
		running   time.Duration // how long the collector has run
		wantOld   []string
		wantSpace []string
		wantFree  uint64
		wantErr   string
	}{{
		name:    "below the high threshold: nothing",
		records: ImageRecords{"old": rec(time.Hour, never, gi)},
		fs:      FsStats{Capacity: 100 * gi, Available: 16 * gi}, // 84%
	}, {
		name: "at the high threshold: down to the low one, least recently used first, then first detected",
		records: ImageRecords{
			"used-1h-ago":    rec(2*time.Hour, time.Hour, gi),
			"never-used-old": rec(3*time.Hour, never, gi),
			"never-used-new": rec(time.Hour, never, gi),
			"used-5m-ago":    rec(2*time.Hour, 5*time.Minute, gi),
			"young":          rec(time.Minute, never, gi), // under MinAge
			"in-use":         rec(time.Hour, 0, gi),
			"pinned":         {FirstDetected: t0.Add(-time.Hour), Pinned: true, Size: gi},
		},
		inUse:     map[string]bool{"in-use": true},
		fs:        FsStats{Capacity: 100 * gi, Available: 15 * gi}, // 85%
		wantSpace: []string{"never-used-old", "never-used-new", "used-1h-ago", "used-5m-ago"},
		wantFree:  5 * gi,
	}, {
		name:     "an image used at this detection is not a candidate even if the caller's inUse misses it",
		records:  ImageRecords{"now": rec(time.Hour, 0, gi)},
		fs:       FsStats{Capacity: 100, Available: 0},
		wantFree: 20,
	}, {
		name:    "available above capacity counts as capacity",
		records: ImageRecords{"a": rec(time.Hour, never, gi)},
		fs:      FsStats{Capacity: 100, Available: 200},
	}, {
		name:    "zero capacity is an error",
		records: ImageRecords{"a": rec(time.Hour, never, gi)},
		wantErr: "invalid capacity 0",
	}, {
		name:    "maximum age: unused images older than MaxAge go whatever the disk, once the collector ran MaxAge",
		records: ImageRecords{"stale": rec(3*time.Hour, 2*time.Hour, gi), "fresh": rec(3*time.Hour, 10*time.Minute, gi), "in-use": rec(3*time.Hour, 2*time.Hour, gi), "never": rec(2*time.Hour, never, gi)},
		inUse:   map[string]bool{"in-use": true},
		fs:      FsStats{Capacity: 100, Available: 90},
		policy:  ImagePolicy{MaxAge: time.Hour},
		running: 61 * time.Minute,
		wantOld: []string{"never", "stale"},
	}, {
		name:    "maximum age: nothing before the collector ran MaxAge",
		records: ImageRecords{"stale": rec(3*time.Hour, 2*time.Hour, gi)},
		fs:      FsStats{Capacity: 100, Available: 90},
		policy:  ImagePolicy{MaxAge: time.Hour},
		running: time.Hour,
	}, {
		name:    "thresholds checked",
		fs:      FsStats{Capacity: 100, Available: 90},
		policy:  ImagePolicy{HighThresholdPercent: 70, LowThresholdPercent: 75},
		wantErr: "can not be higher",
	}, {
		name:    "MaxAge must exceed MinAge",
		fs:      FsStats{Capacity: 100, Available: 90},
		policy:  ImagePolicy{MaxAge: time.Minute},
		wantErr: "must be greater than MinAge",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := PlanImages(t0, t0.Add(-tc.running), tc.records, tc.inUse, tc.fs, tc.policy)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOld, candidateIDs(plan.Old)); diff != "" {
				t.Errorf("old (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSpace, candidateIDs(plan.Space)); diff != "" {
				t.Errorf("space candidates (-want +got):\n%s", diff)
			}
			if plan.BytesToFree != tc.wantFree {
				t.Errorf("BytesToFree = %d, want %d", plan.BytesToFree, tc.wantFree)
			}
		})
	}
}

type fakeImages struct {
	images  []*runtimeapi.Image
	removed []string
	refuse  map[string]bool
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f.images, nil
}

func (f *fakeImages) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	if f.refuse[spec.Image] {
		return errors.New("image is busy")
	}
	f.removed = append(f.removed, spec.Image)
	for i, im := range f.images {
		if im.Id == spec.Image {
			f.images = append(f.images[:i], f.images[i+1:]...)
			break
		}
	}
	return nil
}

type fakeContainers []*runtimeapi.Container

func (f fakeContainers) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return f, nil
}

// TestImageCollectorCollect: with a fake clock, images first seen less
// than MinAge ago survive a full disk; once old enough the least recently
// used go until the low threshold is reached, in-use and pinned ones
// never; a refused removal is reported and the next candidate is tried;
// not enough to free is an error with the kubelet's words.
func TestImageCollectorCollect(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	imgs := &fakeImages{
		images: []*runtimeapi.Image{
			img("sha256:app", 30, "app:1"),
			img("sha256:old1", 10, "old:1"),
			img("sha256:old2", 10, "old:2"),
			img("sha256:old3", 10, "old:3"),
			img("sha256:pause", 10, "pause:3.10"),
		},
		refuse: map[string]bool{"sha256:old2": true},
	}
	used := 100 - 10 // 90% full
	c, err := NewImageCollector(imgs, ImageOptions{
		Containers: fakeContainers{using("sha256:app")},
		FsStats: func(context.Context) (FsStats, error) {
			return FsStats{Capacity: 100, Available: uint64(100 - used)}, nil
		},
		Pinned: []string{"pause:3.10"},
		Clock:  clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Collect(t.Context())
	if err == nil || len(res.Removed) != 0 {
		t.Fatalf("first collection: removed %v, err %v; want nothing (MinAge) and an error", res.Removed, err)
	}
	clk.Step(2 * time.Minute)
	// 90% → 80%: 10 bytes to free. old1 goes first (all equally unused,
	// same first detection: by ID).
	res, err = c.Collect(t.Context())
	if err != nil {
		t.Fatalf("second collection: %v", err)
	}
	if diff := cmp.Diff([]string{"sha256:old1"}, imgs.removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	// Fuller still: 30 to free; old2 refused, old3 freed; app and pause
	// never: not enough.
	used = 100 - 0
	res, err = c.Collect(t.Context())
	if err == nil || !strings.Contains(err.Error(), "image is busy") || !strings.Contains(err.Error(), "Attempted to free 20 bytes, but only found 10 bytes eligible to free") {
		t.Errorf("third collection: err %v", err)
	}
	if diff := cmp.Diff([]string{"sha256:old1", "sha256:old3"}, imgs.removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if res.Freed != 10 {
		t.Errorf("freed %d, want 10", res.Freed)
	}
}

// TestImageCollectorDeleteUnused: the eviction manager's reclaim removes
// every unused image old enough, whatever the disk usage, never one in
// use, pinned or younger than MinAge.
func TestImageCollectorDeleteUnused(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	imgs := &fakeImages{images: []*runtimeapi.Image{
		img("sha256:app", 30, "app:1"), img("sha256:old1", 10), img("sha256:old2", 10), img("sha256:pinned", 10, "pause:3.10"),
	}}
	c, err := NewImageCollector(imgs, ImageOptions{
		Containers: fakeContainers{using("sha256:app")},
		FsStats:    func(context.Context) (FsStats, error) { return FsStats{Capacity: 100, Available: 99}, nil },
		Pinned:     []string{"pause:3.10"},
		Clock:      clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.DeleteUnused(t.Context()); err != nil || len(res.Removed) != 0 {
		t.Fatalf("at first detection: removed %v, %v; want none (MinAge)", res.Removed, err)
	}
	clk.Step(2 * time.Minute)
	imgs.images = append(imgs.images, img("sha256:new", 10))
	res, err := c.DeleteUnused(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sha256:old1", "sha256:old2"}, candidateIDs(res.Removed)); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// TestImageCollectorListed: each detection tells Listed the images present
// and when the list was asked for.
func TestImageCollectorListed(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	imgs := &fakeImages{images: []*runtimeapi.Image{img("sha256:a", 10, "a:1"), img("sha256:b", 10)}}
	var listedAt []time.Time
	var listed [][]string
	c, err := NewImageCollector(imgs, ImageOptions{
		Containers: fakeContainers{},
		FsStats:    func(context.Context) (FsStats, error) { return FsStats{Capacity: 100, Available: 99}, nil },
		Clock:      clk,
		Listed: func(at time.Time, ids []string) {
			listedAt, listed = append(listedAt, at), append(listed, ids)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	imgs.images = imgs.images[:1]
	if _, err := c.DeleteUnused(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{{"sha256:a", "sha256:b"}, {"sha256:a"}}, listed); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	if len(listedAt) != 2 || !listedAt[0].Equal(t0) || !listedAt[1].Equal(t0.Add(time.Minute)) {
		t.Errorf("listed at %v", listedAt)
	}
}
