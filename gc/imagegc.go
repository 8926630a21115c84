package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Images is the part of the CRI image service the image collector calls;
// runtime.ImageService satisfies it.
type Images interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
}

// ContainerLister lists the runtime's containers: an image any of them
// uses (running or not, as the kubelet) is in use.
type ContainerLister interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// imageClienter is the runtime/cri Client's access to the generated image
// client, for ImageFsInfo.
type imageClienter interface {
	ImageClient() runtimeapi.ImageServiceClient
}

// DefaultImagePeriod is the kubelet's ImageGCPeriod.
const DefaultImagePeriod = 5 * time.Minute

// ImageOptions configure an ImageCollector.
type ImageOptions struct {
	// Policy is the collection policy. Defaults to the kubelet's: 85% high,
	// 80% low threshold, minimum age 2m, no maximum age.
	Policy ImagePolicy
	// Containers lists the containers whose images are in use. Required.
	Containers ContainerLister
	// FsStats reads the image file system's size and free space. Defaults
	// to statfs of ImageFsPath when set, else of the mount point the
	// runtime reports in CRI ImageFsInfo (when Images is a runtime/cri
	// Client).
	FsStats func(ctx context.Context) (FsStats, error)
	// ImageFsPath is a path on the image file system, for the default
	// FsStats.
	ImageFsPath string
	// Pinned names images (by ID, tag or digest) never removed, beside
	// those the runtime reports pinned: the sandbox image, say.
	Pinned []string
	// Period between collections. Defaults to 5m.
	Period time.Duration
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to discarding.
	Logger logr.Logger
	// Listed, when set, is told the IDs of the images present at each
	// detection, listed at listedAt (before the list call): the agent
	// prunes its image pull records with it, as the kubelet's image
	// manager does.
	Listed func(listedAt time.Time, ids []string)
}

// ImageCollector removes unused images as the kubelet's image garbage
// collector: it detects the images and their use at every collection
// (remembering when each was first seen and last used) and removes the
// least recently used unused ones while the image file system is above
// the high threshold, down to the low one. It is safe for concurrent use.
type ImageCollector struct {
	images Images
	opts   ImageOptions
	log    logr.Logger
	pinned map[string]bool

	mu      sync.Mutex // serialises collections; guards below
	records ImageRecords
	began   time.Time
}

// NewImageCollector returns a collector over images. It does no I/O.
func NewImageCollector(images Images, opts ImageOptions) (*ImageCollector, error) {
	if images == nil {
		return nil, errors.New("gc: NewImageCollector needs Images")
	}
	if opts.Containers == nil {
		return nil, errors.New("gc: ImageOptions.Containers is required")
	}
	if _, err := opts.Policy.withDefaults(); err != nil {
		return nil, err
	}
	if opts.Period < 0 {
		return nil, errors.New("gc: negative image collection period")
	}
	if opts.Period == 0 {
		opts.Period = DefaultImagePeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.FsStats == nil {
		switch {
		case opts.ImageFsPath != "":
			path := opts.ImageFsPath
			opts.FsStats = func(context.Context) (FsStats, error) { return Statfs(path) }
		default:
			ic, ok := images.(imageClienter)
			if !ok {
				return nil, errors.New("gc: the image collector needs FsStats or ImageFsPath (the runtime does not tell its image file system)")
			}
			opts.FsStats = func(ctx context.Context) (FsStats, error) { return imageFsStats(ctx, ic.ImageClient()) }
		}
	}
	pinned := map[string]bool{}
	for _, p := range opts.Pinned {
		pinned[p] = true
	}
	return &ImageCollector{images: images, opts: opts, log: opts.Logger.WithName("imagegc"), pinned: pinned, records: ImageRecords{}}, nil
}

// imageFsStats asks the runtime for its image file system's mount point
// and reads its size.
func imageFsStats(ctx context.Context, ic runtimeapi.ImageServiceClient) (FsStats, error) {
	resp, err := ic.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return FsStats{}, fmt.Errorf("gc: ImageFsInfo: %w", err)
	}
	for _, fs := range resp.GetImageFilesystems() {
		if mp := fs.GetFsId().GetMountpoint(); mp != "" {
			return Statfs(mp)
		}
	}
	return FsStats{}, errors.New("gc: ImageFsInfo names no image file system")
}

// Run collects every Period until ctx ends; it returns nil then. The
// first collection only detects the images. Errors are logged.
func (c *ImageCollector) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.began.IsZero() {
		c.began = c.opts.Clock.Now()
	}
	c.mu.Unlock()
	if _, err := c.detect(ctx); err != nil && ctx.Err() == nil {
		c.log.Error(err, "Image detection failed")
	}
	t := c.opts.Clock.NewTicker(c.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if _, err := c.Collect(ctx); err != nil && ctx.Err() == nil {
			c.log.Error(err, "Image garbage collection failed")
		}
	}
}

// ImageResult is what a collection did.
type ImageResult struct {
	Plan    ImagePlan
	Removed []ImageCandidate
	Freed   uint64
}

func (c *ImageCollector) detect(ctx context.Context) (map[string]bool, error) {
	listedAt := c.opts.Clock.Now()
	images, err := c.images.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("gc: listing images: %w", err)
	}
	if c.opts.Listed != nil {
		ids := make([]string, len(images))
		for i, im := range images {
			ids[i] = im.GetId()
		}
		c.opts.Listed(listedAt, ids)
	}
	containers, err := c.opts.Containers.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("gc: listing containers: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records.Detect(c.opts.Clock.Now(), images, containers, c.pinned), nil
}

// Collect detects the images, plans and carries out one collection. It
// returns an error when the file system cannot be read, an image cannot
// be removed, or not enough could be freed (the kubelet's "Failed to
// garbage collect required amount of images").
func (c *ImageCollector) Collect(ctx context.Context) (ImageResult, error) {
	inUse, err := c.detect(ctx)
	if err != nil {
		return ImageResult{}, err
	}
	fs, fsErr := c.opts.FsStats(ctx)
	if fsErr != nil {
		fsErr = fmt.Errorf("gc: reading the image file system: %w", fsErr)
	}
	c.mu.Lock()
	now := c.opts.Clock.Now()
	began := c.began
	if began.IsZero() {
		began = now
		c.began = now
	}
	if fsErr != nil {
		// Without the file system's size, only images too old may go.
		fs = FsStats{}
	}
	plan, planErr := PlanImages(now, began, c.records, inUse, fs, c.opts.Policy)
	c.mu.Unlock()
	res := ImageResult{Plan: plan}
	var errs []error
	if fsErr != nil {
		errs = append(errs, fsErr)
	} else if planErr != nil {
		errs = append(errs, planErr)
	}
	remove := c.remover(ctx, &res, &errs)
	for _, im := range plan.Old {
		remove(im)
	}
	if plan.BytesToFree > 0 {
		for _, im := range plan.Space {
			if res.Freed >= plan.BytesToFree || ctx.Err() != nil {
				break
			}
			remove(im)
		}
		if res.Freed < plan.BytesToFree {
			errs = append(errs, fmt.Errorf("gc: Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", plan.BytesToFree, res.Freed))
		}
	}
	return res, errors.Join(errs...)
}

// remover returns the function that removes one image, counting it in
// res or its error in errs.
func (c *ImageCollector) remover(ctx context.Context, res *ImageResult, errs *[]error) func(ImageCandidate) bool {
	return func(im ImageCandidate) bool {
		if err := c.images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: im.ID}); err != nil && !runtime.IsNotFound(err) {
			*errs = append(*errs, fmt.Errorf("gc: removing image %s %v: %w", im.ID, im.Tags, err))
			return false
		}
		c.mu.Lock()
		delete(c.records, im.ID)
		c.mu.Unlock()
		res.Removed = append(res.Removed, im)
		res.Freed += im.Size
		c.log.Info("Removed image", "imageID", im.ID, "tags", im.Tags, "size", im.Size, "reason", im.Reason)
		return true
	}
}

// DeleteUnused removes every unused image first seen at least MinAge ago,
// whatever the disk usage: the eviction manager's node-level reclaim
// under disk pressure (the kubelet's DeleteUnusedImages).
func (c *ImageCollector) DeleteUnused(ctx context.Context) (ImageResult, error) {
	inUse, err := c.detect(ctx)
	if err != nil {
		return ImageResult{}, err
	}
	c.mu.Lock()
	cands, err := UnusedImages(c.opts.Clock.Now(), c.records, inUse, c.opts.Policy)
	c.mu.Unlock()
	if err != nil {
		return ImageResult{}, err
	}
	var res ImageResult
	var errs []error
	remove := c.remover(ctx, &res, &errs)
	for _, im := range cands {
		if ctx.Err() != nil {
			break
		}
		remove(im)
	}
	return res, errors.Join(errs...)
}

// FsStats reads the image file system as the collector does.
func (c *ImageCollector) FsStats(ctx context.Context) (FsStats, error) { return c.opts.FsStats(ctx) }
