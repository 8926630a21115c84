package runtimetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// image is an image present in the runtime. Its proto is immutable.
type image struct {
	id    string // "sha256:" + 64 hex digits, derived from the reference
	ref   string // normalised
	proto *runtimeapi.Image
}

// imageSize is the size every image reports.
const imageSize = 1 << 20

// normalizeRef expands an image reference the way containerd does:
// "busybox" is "docker.io/library/busybox:latest".
func normalizeRef(ref string) string {
	if ref == "" || strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	domain, rest, hasSlash := strings.Cut(name, "/")
	if !hasSlash || (!strings.ContainsAny(domain, ".:") && domain != "localhost") {
		domain, rest = "docker.io", name
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	name = domain + "/" + rest
	if hasDigest {
		return name + "@" + digest
	}
	if !strings.Contains(rest[strings.LastIndexByte(rest, '/')+1:], ":") {
		name += ":latest"
	}
	return name
}

func imageID(normalized string) string {
	sum := sha256.Sum256([]byte(normalized))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// findImageLocked finds an image by reference (normalised) or by ID.
func (r *Runtime) findImageLocked(ref string) *image {
	if ref == "" {
		return nil
	}
	if img, ok := r.images[normalizeRef(ref)]; ok {
		return img
	}
	if img, ok := r.imagesByID[ref]; ok {
		return img
	}
	if img, ok := r.imagesByID["sha256:"+ref]; ok {
		return img
	}
	return nil
}

func (r *Runtime) addImageLocked(ref string) *image {
	if img := r.findImageLocked(ref); img != nil {
		return img
	}
	n := normalizeRef(ref)
	img := &image{id: imageID(n), ref: n}
	img.proto = &runtimeapi.Image{
		Id:   img.id,
		Size: imageSize,
		Spec: &runtimeapi.ImageSpec{Image: img.id},
	}
	if strings.Contains(n, "@") {
		img.proto.RepoDigests = []string{n}
	} else {
		img.proto.RepoTags = []string{n}
	}
	r.images[n] = img
	r.imagesByID[img.id] = img
	r.imageList = append(r.imageList, img)
	return img
}

// ImageAdd makes the image present, as if pulled.
func (r *Runtime) ImageAdd(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addImageLocked(ref)
}

// ListImages implements runtime.ImageService, in the order the images
// arrived.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if err := r.enter(ctx, "ListImages"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if ref := filter.GetImage().GetImage(); ref != "" {
		if img := r.findImageLocked(ref); img != nil {
			return []*runtimeapi.Image{img.proto}, nil
		}
		return nil, nil
	}
	out := make([]*runtimeapi.Image, 0, len(r.images))
	for _, img := range r.imageList {
		out = append(out, img.proto)
	}
	return out, nil
}

// ImageStatus implements runtime.ImageService: an image that is not
// present has a nil Image and no error, as the CRI specifies.
func (r *Runtime) ImageStatus(ctx context.Context, spec *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.enter(ctx, "ImageStatus"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	resp := &runtimeapi.ImageStatusResponse{}
	if img := r.findImageLocked(spec.GetImage()); img != nil {
		resp.Image = img.proto
	}
	return resp, nil
}

// PullImage implements runtime.ImageService: the image becomes present if
// the function set with SetPullable allows it (by default every image
// pulls), and PullImage returns its ID.
func (r *Runtime) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter(ctx, "PullImage"); err != nil {
		return "", err
	}
	ref := spec.GetImage()
	if ref == "" {
		return "", status.Error(codes.InvalidArgument, "runtimetest: no image to pull")
	}
	r.mu.RLock()
	pullable := r.pullable
	r.mu.RUnlock()
	// Called without the lock: it is the test's code.
	if pullable != nil && !pullable(ref) {
		return "", status.Errorf(codes.NotFound, "runtimetest: pull %q: not found", ref)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addImageLocked(ref).id, nil
}

// RemoveImage implements runtime.ImageService. Removing an image that is
// not present succeeds, as the CRI requires.
func (r *Runtime) RemoveImage(ctx context.Context, spec *runtimeapi.ImageSpec) error {
	if err := r.enter(ctx, "RemoveImage"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.findImageLocked(spec.GetImage())
	if img == nil {
		return nil
	}
	delete(r.images, img.ref)
	delete(r.imagesByID, img.id)
	if i := slices.Index(r.imageList, img); i >= 0 {
		r.imageList = slices.Delete(r.imageList, i, i+1)
	}
	return nil
}
