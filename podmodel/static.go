package podmodel

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// The errors of StaticPodForbiddenReference, matched with errors.Is.
var (
	// ErrStaticPodClusterTrustBundle: a static pod uses a ClusterTrustBundle
	// projected volume source.
	ErrStaticPodClusterTrustBundle = errors.New("static pods may not use ClusterTrustBundle projected volume sources")
	// ErrStaticPodResourceClaims: a static pod uses ResourceClaims.
	ErrStaticPodResourceClaims = errors.New("static pods may not use ResourceClaims")
)

// StaticPodForbiddenReference returns an error when a static pod uses what
// the kubelet refuses to run without the API server behind it:
// spec.resourceClaims, or a projected volume with a ClusterTrustBundle
// source. The error is ErrStaticPodResourceClaims or wraps
// ErrStaticPodClusterTrustBundle with the volume's name; the messages are
// the kubelet's. It returns nil for any other pod; call
// it for static pods only (IsStatic).
func StaticPodForbiddenReference(pod *v1.Pod) error {
	if len(pod.Spec.ResourceClaims) > 0 {
		return ErrStaticPodResourceClaims
	}
	for i := range pod.Spec.Volumes {
		p := pod.Spec.Volumes[i].Projected
		if p == nil {
			continue
		}
		for _, s := range p.Sources {
			if s.ClusterTrustBundle != nil {
				return fmt.Errorf("%w (volume %q)", ErrStaticPodClusterTrustBundle, pod.Spec.Volumes[i].Name)
			}
		}
	}
	return nil
}
