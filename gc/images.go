package gc

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImagePolicy is the kubelet's image garbage collection policy.
type ImagePolicy struct {
	// HighThresholdPercent is the image file system usage at which
	// collection starts (the kubelet's imageGCHighThresholdPercent).
	// Defaults to 85; 100 disables collection for space.
	HighThresholdPercent int
	// LowThresholdPercent is the usage collection brings the file system
	// down to (imageGCLowThresholdPercent). Defaults to 80.
	LowThresholdPercent int
	// MinAge is how long an unused image is kept after it was first seen
	// (imageMinimumGCAge). Defaults to 2m.
	MinAge time.Duration
	// MaxAge removes an image unused for that long whatever the disk
	// usage (imageMaximumGCAge), but only once the collector ran that long.
	// Defaults to 0: never.
	MaxAge time.Duration
}

func (p ImagePolicy) withDefaults() (ImagePolicy, error) {
	if p.HighThresholdPercent == 0 {
		p.HighThresholdPercent = 85
	}
	if p.LowThresholdPercent == 0 {
		p.LowThresholdPercent = 80
	}
	if p.MinAge == 0 {
		p.MinAge = 2 * time.Minute
	}
	switch {
	case p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100:
		return p, fmt.Errorf("gc: invalid HighThresholdPercent %d, must be in range [0-100]", p.HighThresholdPercent)
	case p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100:
		return p, fmt.Errorf("gc: invalid LowThresholdPercent %d, must be in range [0-100]", p.LowThresholdPercent)
	case p.LowThresholdPercent > p.HighThresholdPercent:
		return p, fmt.Errorf("gc: LowThresholdPercent %d can not be higher than HighThresholdPercent %d", p.LowThresholdPercent, p.HighThresholdPercent)
	case p.MinAge < 0 || p.MaxAge < 0:
		return p, errors.New("gc: negative image MinAge or MaxAge")
	case p.MaxAge > 0 && p.MaxAge <= p.MinAge:
		return p, fmt.Errorf("gc: image MaxAge %s must be greater than MinAge %s", p.MaxAge, p.MinAge)
	}
	return p, nil
}

// ImageRecord is what the collector remembers of an image between
// collections.
type ImageRecord struct {
	// FirstDetected is when the image was first listed.
	FirstDetected time.Time
	// LastUsed is the last time a container used it (zero: never seen in
	// use).
	LastUsed time.Time
	Size     uint64
	Pinned   bool
	// Tags and digests, for logs and for matching containers that name the
	// image by tag.
	RepoTags []string
}

// ImageRecords are the records of the images, by image ID. It is pure
// data: Detect updates it from a listing.
type ImageRecords map[string]*ImageRecord

// Detect updates the records from the images listed at now and the
// images the containers use (by ID, tag or digest): new images are
// recorded as first detected now, images in use as used now, images
// gone are forgotten. It returns the IDs of the images in use.
func (r ImageRecords) Detect(now time.Time, images []*runtimeapi.Image, containers []*runtimeapi.Container, pinned map[string]bool) map[string]bool {
	used := map[string]bool{}
	for _, c := range containers {
		used[c.GetImageRef()] = true
		used[c.GetImage().GetImage()] = true
		if u := c.GetImage().GetUserSpecifiedImage(); u != "" {
			used[u] = true
		}
	}
	inUse := map[string]bool{}
	seen := make(map[string]bool, len(images))
	for _, im := range images {
		id := im.GetId()
		if id == "" {
			continue
		}
		seen[id] = true
		rec := r[id]
		if rec == nil {
			rec = &ImageRecord{FirstDetected: now}
			r[id] = rec
		}
		rec.Size = im.GetSize()
		rec.Pinned = im.GetPinned()
		rec.RepoTags = append(append([]string(nil), im.GetRepoTags()...), im.GetRepoDigests()...)
		names := append([]string{id}, rec.RepoTags...)
		for _, n := range names {
			if pinned[n] {
				rec.Pinned = true
			}
			if used[n] {
				inUse[id] = true
			}
		}
		if inUse[id] {
			rec.LastUsed = now
		}
	}
	for id := range r {
		if !seen[id] {
			delete(r, id)
		}
	}
	return inUse
}

// FsStats is the image file system's size and free space, in bytes, and
// its inodes (0 when unknown).
type FsStats struct {
	Capacity           uint64
	Available          uint64
	Inodes, InodesFree uint64
}

// ImageCandidate is an image the collector may remove.
type ImageCandidate struct {
	ID     string
	Size   uint64
	Tags   []string
	Reason string // ReasonAge or ReasonSpace
}

// Why an image is removed.
const (
	ReasonAge   = "age"
	ReasonSpace = "space"
)

// ImagePlan is what an image collection does: remove the images too old
// (Old), then the Space candidates in order until BytesToFree are freed.
type ImagePlan struct {
	Old         []ImageCandidate
	Space       []ImageCandidate
	BytesToFree uint64
	// UsagePercent is the image file system's usage before collection.
	UsagePercent int
}

// PlanImages decides, as the kubelet's image garbage collector, which
// images to remove at now. Images in use or pinned are never candidates;
// the others go least recently used first (then first detected first).
// With MaxAge, images unused for longer than MaxAge go whatever the disk
// usage, once the collector has been running (since began) longer than
// MaxAge. When the file system's usage is at or above
// HighThresholdPercent, enough bytes to bring it to LowThresholdPercent
// are to be freed, from images not used at now and first detected at
// least MinAge ago. It does no I/O.
func PlanImages(now, began time.Time, records ImageRecords, inUse map[string]bool, fs FsStats, policy ImagePolicy) (ImagePlan, error) {
	policy, err := policy.withDefaults()
	if err != nil {
		return ImagePlan{}, err
	}
	order := candidates(records, inUse)
	var plan ImagePlan
	if policy.MaxAge > 0 && now.Sub(began) > policy.MaxAge {
		rest := order[:0:0]
		for _, c := range order {
			rec := records[c.ID]
			// An image never seen in use ages from its first detection.
			last := rec.LastUsed
			if last.IsZero() {
				last = rec.FirstDetected
			}
			if now.Sub(last) > policy.MaxAge {
				c.Reason = ReasonAge
				plan.Old = append(plan.Old, c)
				continue
			}
			rest = append(rest, c)
		}
		order = rest
	}
	if fs.Capacity == 0 {
		return plan, errors.New("gc: invalid capacity 0 on image filesystem")
	}
	avail := min(fs.Available, fs.Capacity)
	plan.UsagePercent = 100 - int(avail*100/fs.Capacity)
	if plan.UsagePercent < policy.HighThresholdPercent {
		return plan, nil
	}
	target := fs.Capacity * uint64(100-policy.LowThresholdPercent) / 100
	if target <= avail {
		return plan, nil
	}
	plan.BytesToFree = target - avail
	// Images freed for age count towards the space.
	var freed uint64
	for _, c := range plan.Old {
		freed += c.Size
	}
	if freed >= plan.BytesToFree {
		return plan, nil
	}
	plan.Space = eligible(now, order, records, policy)
	return plan, nil
}

// eligible are the candidates (in order) that may go for space: not used
// at this detection and first detected at least MinAge ago.
func eligible(now time.Time, order []ImageCandidate, records ImageRecords, policy ImagePolicy) []ImageCandidate {
	var out []ImageCandidate
	for _, c := range order {
		rec := records[c.ID]
		if !rec.LastUsed.Before(now) {
			continue // in use at this detection
		}
		if now.Sub(rec.FirstDetected) < policy.MinAge {
			continue // may have just been pulled for a container
		}
		c.Reason = ReasonSpace
		out = append(out, c)
	}
	return out
}

// UnusedImages are every image the eviction manager's reclaim may remove
// at now (the kubelet's DeleteUnusedImages): not in use, not pinned, first
// detected at least MinAge ago, least recently used first.
func UnusedImages(now time.Time, records ImageRecords, inUse map[string]bool, policy ImagePolicy) ([]ImageCandidate, error) {
	policy, err := policy.withDefaults()
	if err != nil {
		return nil, err
	}
	return eligible(now, candidates(records, inUse), records, policy), nil
}

// candidates are the images neither in use nor pinned, least recently
// used first, then first detected first.
func candidates(records ImageRecords, inUse map[string]bool) []ImageCandidate {
	var order []ImageCandidate
	for id, rec := range records {
		if inUse[id] || rec.Pinned {
			continue
		}
		order = append(order, ImageCandidate{ID: id, Size: rec.Size, Tags: rec.RepoTags})
	}
	slices.SortFunc(order, func(a, b ImageCandidate) int {
		ra, rb := records[a.ID], records[b.ID]
		return cmp.Or(ra.LastUsed.Compare(rb.LastUsed), ra.FirstDetected.Compare(rb.FirstDetected), cmp.Compare(a.ID, b.ID))
	})
	return order
}
