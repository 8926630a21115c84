package node

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/version"
)

// AnnotationVersion holds the version of nodekit the agent was built with
// (version.Info.Module); the Node's kubeletVersion is the Kubernetes
// version nodekit follows, with nodekit's version as build metadata
// (version.Info.KubeletVersion).
const AnnotationVersion = "nodekit.io/version"

// DefaultKubernetesVersion is the kubelet version nodekit follows, when
// the binary does not tell the version of k8s.io/api it was built with.
const DefaultKubernetesVersion = version.DefaultKubernetes

// MaxImages is the kubelet's cap of status.images (nodeStatusMaxImages),
// and MaxNamesPerImage its cap of names per image.
const (
	MaxImages        = 50
	MaxNamesPerImage = 5
)

// KubernetesVersion is the Kubernetes version nodekit follows, as a
// kubelet reports it: v1.N.P for the k8s.io/api v0.N.P the binary was
// built with, else DefaultKubernetesVersion (version.Info.Kubernetes).
func KubernetesVersion() string {
	return version.Get().Kubernetes
}

// Allocatable is the kubelet's node allocatable: capacity less every
// reservation (system-reserved, kube-reserved, the hard eviction
// thresholds), each resource floored at zero.
func Allocatable(capacity v1.ResourceList, reserved ...v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for name, q := range capacity {
		a := q.DeepCopy()
		for _, r := range reserved {
			if rq, ok := r[name]; ok {
				a.Sub(rq)
			}
		}
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, q.Format)
		}
		out[name] = a
	}
	return out
}

// Images is status.images as the kubelet reports it: the largest images
// first (then by ID), at most max (negative: all), each with its digests
// then tags, at most MaxNamesPerImage names.
func Images(images []*runtimeapi.Image, max int) []v1.ContainerImage {
	sorted := slices.Clone(images)
	slices.SortStableFunc(sorted, func(a, b *runtimeapi.Image) int {
		return cmp.Or(cmp.Compare(b.GetSize(), a.GetSize()), cmp.Compare(a.GetId(), b.GetId()))
	})
	if max >= 0 && len(sorted) > max {
		sorted = sorted[:max]
	}
	out := make([]v1.ContainerImage, 0, len(sorted))
	for _, im := range sorted {
		names := append(slices.Clone(im.GetRepoDigests()), im.GetRepoTags()...)
		if len(names) > MaxNamesPerImage {
			names = names[:MaxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(im.GetSize())})
	}
	return out
}

// observed is what the status loop reads at each update beside the facts.
type observed struct {
	runtimeVersion string
	health         error
	pressure       []v1.NodeConditionType
	// images for status.images; nil leaves the Node's.
	images []v1.ContainerImage
	// runtimeHandlers for status.runtimeHandlers; nil leaves the Node's.
	runtimeHandlers []v1.NodeRuntimeHandler
	// features for status.features; nil leaves the Node's.
	features *v1.NodeFeatures
}

// The reasons and messages of the pressure conditions when under
// pressure, the kubelet's.
const (
	reasonInsufficientMemory  = "KubeletHasInsufficientMemory"
	reasonDiskPressure        = "KubeletHasDiskPressure"
	reasonInsufficientPID     = "KubeletHasInsufficientPID"
	messageInsufficientMemory = "agent has insufficient memory available"
	messageDiskPressure       = "agent has disk pressure"
	messageInsufficientPID    = "agent has insufficient PID available"
)

// pressureCondition is the condition under pressure of type t.
func pressureCondition(t v1.NodeConditionType) (v1.NodeCondition, bool) {
	switch t {
	case v1.NodeMemoryPressure:
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: reasonInsufficientMemory, Message: messageInsufficientMemory}, true
	case v1.NodeDiskPressure:
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: reasonDiskPressure, Message: messageDiskPressure}, true
	case v1.NodePIDPressure:
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: reasonInsufficientPID, Message: messageInsufficientPID}, true
	}
	return v1.NodeCondition{}, false
}

// The node events, the kubelet's reasons (all Normal).
const (
	EventStarting                = "Starting"
	EventNodeReady               = "NodeReady"
	EventNodeNotReady            = "NodeNotReady"
	EventNodeHasSufficientMemory = "NodeHasSufficientMemory"
	EventNodeHasInsufficientMem  = "NodeHasInsufficientMemory"
	EventNodeHasNoDiskPressure   = "NodeHasNoDiskPressure"
	EventNodeHasDiskPressure     = "NodeHasDiskPressure"
	EventNodeHasSufficientPID    = "NodeHasSufficientPID"
	EventNodeHasInsufficientPID  = "NodeHasInsufficientPID"
)

// conditionEvents are the events of the owned conditions that are new in
// or changed from old to new, in new's order, as the kubelet records
// them.
func conditionEvents(old, new []v1.NodeCondition) []string {
	var out []string
	for _, c := range new {
		i := conditionIndex(old, c.Type)
		if i >= 0 && old[i].Status == c.Status {
			continue
		}
		ok := c.Status == v1.ConditionTrue
		var reason string
		switch c.Type {
		case v1.NodeReady:
			reason = pick(ok, EventNodeReady, EventNodeNotReady)
		case v1.NodeMemoryPressure:
			reason = pick(ok, EventNodeHasInsufficientMem, EventNodeHasSufficientMemory)
		case v1.NodeDiskPressure:
			reason = pick(ok, EventNodeHasDiskPressure, EventNodeHasNoDiskPressure)
		case v1.NodePIDPressure:
			reason = pick(ok, EventNodeHasInsufficientPID, EventNodeHasSufficientPID)
		default:
			continue
		}
		out = append(out, reason)
	}
	return out
}

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// EventRecorder records events; client-go's record.EventRecorder
// satisfies it.
type EventRecorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// nodeRef is the object the node's events are about, as the kubelet's.
func nodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

func (c *Controller) event(reason, message string) {
	if c.opts.Recorder == nil {
		return
	}
	c.opts.Recorder.Event(nodeRef(c.opts.nodeName), v1.EventTypeNormal, reason, message)
}

// recordConditionEvents records the events of the owned conditions that
// changed between two statuses.
func (c *Controller) recordConditionEvents(old, new v1.NodeStatus) {
	for _, reason := range conditionEvents(old.Conditions, new.Conditions) {
		c.event(reason, fmt.Sprintf("Node %s status is now: %s", c.opts.nodeName, reason))
	}
}

// readImages is status.images from Options.Images, or nil (the Node's
// kept) on error or without it.
func (s *statusLoop) readImages(ctx context.Context) []v1.ContainerImage {
	if s.c.opts.Images == nil {
		return nil
	}
	images, err := s.c.opts.Images(ctx)
	if err != nil {
		s.c.log.V(4).Info("listing the images failed", "err", err)
		return nil
	}
	return Images(images, MaxImages)
}

// annotationsPatch is the merge patch that sets the annotations of want
// that node lacks or has other values for, with node's UID as a
// precondition; nil when there are none.
func annotationsPatch(node *v1.Node, want map[string]string) ([]byte, error) {
	set := map[string]string{}
	for k, v := range want {
		if cur, ok := node.Annotations[k]; !ok || cur != v {
			set[k] = v
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return nil, fmt.Errorf("node: encoding the annotations patch: %w", err)
	}
	return withUID(patch, node.UID)
}

// versionAnnotations are the annotations every registered Node carries.
func versionAnnotations() map[string]string {
	return map[string]string{AnnotationVersion: version.Get().Module()}
}
