package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages implements runtime.ImageService.
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.ic.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, wrap("ListImages", "", err)
	}
	return resp.Images, nil
}

// ImageStatus implements runtime.ImageService. An absent image is not an
// error: the response's Image is nil.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.ic.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	if err != nil {
		return nil, wrap("ImageStatus", image.GetImage(), err)
	}
	if img := resp.GetImage(); img != nil && img.Id == "" {
		return nil, fmt.Errorf("cri: ImageStatus %s: the runtime returned an image without ID", image.GetImage())
	}
	return resp, nil
}

// PullImage implements runtime.ImageService and returns the pulled image's
// reference (its ID or digest). As in the kubelet, the pull has no
// per-call timeout: a large image takes as long as it takes, and ctx
// bounds it.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.ic.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: podSandboxConfig})
	if err != nil {
		return "", wrap("PullImage", image.GetImage(), err)
	}
	if resp.GetImageRef() == "" {
		return "", fmt.Errorf("cri: PullImage %s: the runtime returned no image reference", image.GetImage())
	}
	return resp.ImageRef, nil
}

// RemoveImage implements runtime.ImageService.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	return wrap("RemoveImage", image.GetImage(), err)
}
