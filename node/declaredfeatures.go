package node

import (
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-helpers/nodedeclaredfeatures"
	ndftypes "k8s.io/component-helpers/nodedeclaredfeatures/types"
)

// implementedFeatureGates are the kubelet feature gates, among those that
// decide a declared node feature (k8s.io/component-helpers/nodedeclaredfeatures),
// whose behaviour nodekit implements. The kubelet declares a feature when
// its gate is on; nodekit declares what it does:
//   - RestartAllContainersOnContainerExits: restartPolicyRules with the
//     RestartAllContainers action (package runtime);
//   - InPlacePodVerticalScalingInitContainers: resizes of init
//     containers (sidecars in place; a regular init container gets its
//     new resources at its next start, see runtime's doc);
//   - InPlacePodLevelResourcesVerticalScaling: resizes of the pod-level
//     resources (spec.resources), the pod cgroup resized in place (see
//     runtime's doc).
//
// Not declared: ExtendWebSocketsToKubelet (the API server translates
// WebSocket exec, attach and port-forward to SPDY for the node API, as for
// a kubelet without it), InPlacePodVerticalScalingMemoryBackedVolumes
// (a memory-backed emptyDir is not resized with its pod),
// UserNamespacesHostNetworkSupport, VolumeBindMountOptions and the DRA
// features (not implemented).
func implementedFeatureGates() ndftypes.FeatureGateMap {
	return ndftypes.FeatureGateMap{
		"RestartAllContainersOnContainerExits":    true,
		"InPlacePodVerticalScalingInitContainers": true,
		"InPlacePodLevelResourcesVerticalScaling": true,
	}
}

// DeclaredFeatures are the node features an agent declares in its
// Node's status.declaredFeatures, as the kubelet discovers its own: the
// features of the registry whose requirements nodekit meets, for the
// Kubernetes version it follows.
func DeclaredFeatures() []string {
	cfg := &ndftypes.NodeConfiguration{FeatureGates: implementedFeatureGates()}
	if v, err := version.ParseGeneric(KubernetesVersion()); err == nil {
		cfg.Version = v
	}
	return nodedeclaredfeatures.DefaultFramework.DiscoverNodeFeatures(cfg)
}
