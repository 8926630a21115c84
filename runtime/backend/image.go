package backend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// ImageResolver is an optional capability of a Backend that has images of
// its own (an image store): ResolveImage returns the ID of the image ref
// names, or an error matching runtime.ErrNotFound when the backend does not
// have it. Without it every image is present: the process of a container
// is found on the host, whatever its image.
type ImageResolver interface {
	ResolveImage(ctx context.Context, ref string) (id string, err error)
}

// ImageStore is an optional capability of an ImageResolver that keeps
// images of its own: the adapter's ImageService then pulls, lists and
// removes the store's images (so that image garbage collection works on
// it). PullImage fetches or imports the image ref names and returns its
// ID, or an error (matching runtime.ErrNotFound for an image no source
// has); ListImages returns every image; RemoveImage forgets a reference
// or an image ID (removing what the store does not have is no error).
type ImageStore interface {
	ImageResolver
	PullImage(ctx context.Context, ref string) (id string, err error)
	ListImages(ctx context.Context) ([]Image, error)
	RemoveImage(ctx context.Context, ref string) error
}

// ImageCommander is an optional capability of an ImageResolver whose
// images have a command of their own: ImageCommand returns the entrypoint
// and Cmd of the image of ID id. A container whose config gives no command
// runs the entrypoint, and, when it gives no arguments either, the Cmd, as
// containerd runs them.
type ImageCommander interface {
	ImageResolver
	ImageCommand(ctx context.Context, id string) (entrypoint, cmd []string, err error)
}

// Image is an image of an ImageStore.
type Image struct {
	// ID is the image's ID ("sha256:<config digest>").
	ID string
	// RepoTags are the references it is known by.
	RepoTags []string
	// Size in bytes on disk.
	Size uint64
}

func criImage(img Image) *runtimeapi.Image {
	out := &runtimeapi.Image{Id: img.ID, RepoTags: slices.Clone(img.RepoTags), Size: img.Size, Spec: &runtimeapi.ImageSpec{Image: img.ID}}
	return out
}

// storeImage returns the store's image of ID id.
func storeImage(ctx context.Context, st ImageStore, id string) (*runtimeapi.Image, error) {
	imgs, err := st.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	for _, img := range imgs {
		if img.ID == id {
			return criImage(img), nil
		}
	}
	return nil, fmt.Errorf("image %s: %w", id, runtime.ErrNotFound)
}

// imageID is the ID of an image of a backend without images: a digest of
// its reference, stable across restarts.
func imageID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (r *Runtime) resolve(ctx context.Context, ref string) (string, error) {
	if ir, ok := r.b.(ImageResolver); ok {
		return ir.ResolveImage(ctx, ref)
	}
	return imageID(ref), nil
}

func (r *Runtime) imageLocked(ref, id string) *runtimeapi.Image {
	img := r.images[ref]
	if img == nil || img.Id != id {
		img = &runtimeapi.Image{Id: id, RepoTags: []string{ref}, Spec: &runtimeapi.ImageSpec{Image: ref}}
		r.images[ref] = img
	}
	return img
}

// ImageStatus implements runtime.ImageService: every image is present,
// unless the Backend is an ImageResolver that does not know it; an
// ImageStore's images have their tags and size.
func (r *Runtime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	id, err := r.resolve(ctx, image.GetImage())
	if runtime.IsNotFound(err) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backend: image status of %q: %w", image.GetImage(), err)
	}
	if st, ok := r.b.(ImageStore); ok {
		img, err := storeImage(ctx, st, id)
		if runtime.IsNotFound(err) {
			return &runtimeapi.ImageStatusResponse{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("backend: image status of %q: %w", image.GetImage(), err)
		}
		return &runtimeapi.ImageStatusResponse{Image: img}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: cloneImage(r.imageLocked(image.GetImage(), id))}, nil
}

// PullImage implements runtime.ImageService: nothing is downloaded; the
// image is present (or, with an ImageResolver, NotFound). An ImageStore
// pulls it.
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter(); err != nil {
		return "", err
	}
	if st, ok := r.b.(ImageStore); ok {
		id, err := st.PullImage(ctx, image.GetImage())
		if err != nil {
			return "", fmt.Errorf("backend: pull image %q: %w", image.GetImage(), err)
		}
		return id, nil
	}
	id, err := r.resolve(ctx, image.GetImage())
	if err != nil {
		return "", fmt.Errorf("backend: pull image %q: %w", image.GetImage(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.imageLocked(image.GetImage(), id)
	return id, nil
}

// ListImages implements runtime.ImageService: the images asked about so
// far, or an ImageStore's images.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	if st, ok := r.b.(ImageStore); ok {
		imgs, err := st.ListImages(ctx)
		if err != nil {
			return nil, fmt.Errorf("backend: list images: %w", err)
		}
		var out []*runtimeapi.Image
		for _, img := range imgs {
			if f := filter.GetImage().GetImage(); f != "" && f != img.ID && !slices.Contains(img.RepoTags, f) {
				continue
			}
			out = append(out, criImage(img))
		}
		return out, nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*runtimeapi.Image
	for ref, img := range r.images {
		if f := filter.GetImage().GetImage(); f != "" && f != ref && f != img.Id {
			continue
		}
		out = append(out, cloneImage(img))
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Image) int { return strings.Compare(a.RepoTags[0], b.RepoTags[0]) })
	return out, nil
}

// RemoveImage implements runtime.ImageService: the image is forgotten (an
// ImageStore removes it).
func (r *Runtime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	if err := r.enter(); err != nil {
		return err
	}
	if st, ok := r.b.(ImageStore); ok {
		if err := st.RemoveImage(ctx, image.GetImage()); err != nil {
			return fmt.Errorf("backend: remove image %q: %w", image.GetImage(), err)
		}
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref, img := range r.images {
		if ref == image.GetImage() || img.Id == image.GetImage() {
			delete(r.images, ref)
		}
	}
	return nil
}

func cloneImage(img *runtimeapi.Image) *runtimeapi.Image {
	return &runtimeapi.Image{Id: img.Id, RepoTags: slices.Clone(img.RepoTags), Spec: &runtimeapi.ImageSpec{Image: img.Spec.GetImage()}}
}
