package podruntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// checkRunAsNonRoot is the kubelet's runAsNonRoot check at container
// creation: when the container's effective security context sets
// runAsNonRoot, its effective runAsUser must not be 0, and without one the
// image's user (from ImageStatus) must be numeric and not 0. A container
// that fails it is not created; the error fails the start with
// CreateContainerConfigError and the kubelet's message.
func (m *Manager) checkRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	nonRoot, runAsUser := effectiveRunAs(pod, c)
	if !nonRoot || runAsUser != nil {
		return verifyRunAsNonRoot(pod, c, nil, "")
	}
	resp, err := m.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image, RuntimeHandler: m.opts.RuntimeHandler}, false)
	if err != nil {
		return fmt.Errorf("reading the user of image %q: %w", c.Image, err)
	}
	uid, username := imageUser(resp.GetImage())
	return verifyRunAsNonRoot(pod, c, uid, username)
}

// imageUser is the user an image runs as, as the kubelet's getImageUser:
// its numeric uid, else its user name, else root (no user set).
func imageUser(img *runtimeapi.Image) (*int64, string) {
	if img != nil {
		if img.Uid != nil {
			uid := img.Uid.Value
			return &uid, ""
		}
		if img.Username != "" {
			return nil, img.Username
		}
	}
	root := int64(0)
	return &root, ""
}

// effectiveRunAs is the container's runAsNonRoot and runAsUser, its own
// overriding the pod's.
func effectiveRunAs(pod *v1.Pod, c *v1.Container) (nonRoot bool, runAsUser *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsNonRoot != nil {
			nonRoot = *psc.RunAsNonRoot
		}
		runAsUser = psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = *csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
	}
	return nonRoot, runAsUser
}

// verifyRunAsNonRoot is the kubelet's rule and messages, given the
// image's uid (nil when unknown) or non-numeric user name.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, uid *int64, username string) error {
	nonRoot, runAsUser := effectiveRunAs(pod, c)
	if !nonRoot {
		return nil
	}
	podDesc := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if runAsUser != nil {
		if *runAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podDesc, c.Name)
		}
		return nil
	}
	switch {
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podDesc, c.Name)
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, podDesc, c.Name)
	}
	return nil
}
