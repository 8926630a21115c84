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
// unless the Backend is an ImageResolver that does not know it.
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
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: cloneImage(r.imageLocked(image.GetImage(), id))}, nil
}

// PullImage implements runtime.ImageService: nothing is downloaded; the
// image is present (or, with an ImageResolver, NotFound).
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter(); err != nil {
		return "", err
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
// far.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if err := r.enter(); err != nil {
		return nil, err
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

// RemoveImage implements runtime.ImageService: the image is forgotten.
func (r *Runtime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	if err := r.enter(); err != nil {
		return err
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
