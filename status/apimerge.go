package status

import (
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/nodekit/nodekit/podmodel"
)

// OwnedCondition reports whether the agent owns the pod condition type,
// as the kubelet owns it: PodScheduled, PodReadyToStartContainers,
// Initialized, Ready, ContainersReady, AllContainersRestarting,
// PodResizePending and PodResizeInProgress. Other
// conditions (readiness
// gates', DisruptionTarget, any controller's) belong to others and are
// kept as the API server holds them.
func OwnedCondition(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.AllContainersRestarting,
		v1.PodResizePending, v1.PodResizeInProgress:
		return true
	}
	return false
}

// mergeForAPI merges the status held (ours) into the status the API server
// holds (stored), as the kubelet's mergePodStatus does:
//   - the conditions the agent does not own are kept as stored (a
//     DisruptionTarget condition of ours replaces the stored one once the
//     phase written is terminal); owned conditions are ours, and a stored
//     owned condition ours lacks is kept, but for the resize conditions
//     (PodResizePending, PodResizeInProgress), which the agent clears by
//     leaving them out, as the kubelet does;
//   - a terminal phase is not written while containers could run: the
//     stored phase, reason and message stay (heldBack);
//   - with a terminal phase written, Ready and ContainersReady are False;
//   - the start time, QoS class, host IPs, nominated node and resource
//     claim statuses stored are kept when ours has none.
//
// stale is set when the stored phase is terminal and ours is not: ours is
// older than what is stored (another writer got further) and must not be
// written, since a terminal phase is never left.
func mergeForAPI(stored, ours v1.PodStatus, couldRun bool, now time.Time) (merged v1.PodStatus, heldBack, stale bool) {
	if podmodel.IsTerminal(stored.Phase) && !podmodel.IsTerminal(ours.Phase) {
		return stored, false, true
	}
	merged = *ours.DeepCopy()
	if stored.ObservedGeneration > merged.ObservedGeneration {
		merged.ObservedGeneration = stored.ObservedGeneration
	}

	if !podmodel.IsTerminal(stored.Phase) && podmodel.IsTerminal(ours.Phase) && couldRun {
		merged.Phase, merged.Reason, merged.Message = stored.Phase, stored.Reason, stored.Message
		heldBack = true
	}

	conds := make([]v1.PodCondition, 0, len(stored.Conditions)+len(ours.Conditions))
	for _, c := range stored.Conditions {
		resize := c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress
		if !OwnedCondition(c.Type) || (!resize && findCondition(ours.Conditions, c.Type) == nil) {
			conds = append(conds, c)
		}
	}
	for _, c := range ours.Conditions {
		switch {
		case OwnedCondition(c.Type):
			conds = append(conds, c)
		case c.Type == v1.DisruptionTarget && podmodel.IsTerminal(merged.Phase):
			if p := findCondition(conds, c.Type); p != nil {
				*p = c
			} else {
				conds = append(conds, c)
			}
		}
	}
	merged.Conditions = conds

	if podmodel.IsTerminal(merged.Phase) {
		reason := "PodCompleted"
		if merged.Phase == v1.PodFailed {
			reason = "PodFailed"
		}
		for _, t := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
			if c := findCondition(merged.Conditions, t); c != nil && c.Status == v1.ConditionTrue {
				c.Status, c.Reason, c.Message = v1.ConditionFalse, reason, ""
				c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
			}
		}
	}

	// A condition whose status is what is stored keeps the stored
	// transition time.
	for i := range merged.Conditions {
		c := &merged.Conditions[i]
		if s := findCondition(stored.Conditions, c.Type); s != nil && s.Status == c.Status && !s.LastTransitionTime.IsZero() {
			c.LastTransitionTime = s.LastTransitionTime
		}
	}

	if stored.StartTime != nil && !stored.StartTime.IsZero() {
		merged.StartTime = stored.StartTime
	}
	if merged.QOSClass == "" {
		merged.QOSClass = stored.QOSClass
	}
	if merged.HostIP == "" && len(merged.HostIPs) == 0 {
		merged.HostIP, merged.HostIPs = stored.HostIP, stored.HostIPs
	}
	if merged.NominatedNodeName == "" {
		merged.NominatedNodeName = stored.NominatedNodeName
	}
	if len(merged.ResourceClaimStatuses) == 0 {
		merged.ResourceClaimStatuses = stored.ResourceClaimStatuses
	}
	if merged.ExtendedResourceClaimStatus == nil {
		merged.ExtendedResourceClaimStatus = stored.ExtendedResourceClaimStatus
	}
	return merged, heldBack, false
}

func findCondition(cs []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// statusPatch returns the strategic merge patch that turns the status of
// the API object api into status, with the object's UID and resource
// version as preconditions: the API server refuses it (Invalid, Conflict)
// if the pod was replaced or changed since it was read. It returns nil when
// the statuses are the same as the API server encodes them (times at
// second precision).
func statusPatch(api *v1.Pod, status v1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(v1.Pod{Status: api.Status})
	if err != nil {
		return nil, fmt.Errorf("status: encoding pod status: %w", err)
	}
	newData, err := json.Marshal(v1.Pod{Status: status})
	if err != nil {
		return nil, fmt.Errorf("status: encoding pod status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("status: computing the status patch: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("status: decoding the status patch: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	meta := map[string]any{"uid": api.UID}
	if api.ResourceVersion != "" {
		meta["resourceVersion"] = api.ResourceVersion
	}
	m["metadata"] = meta
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("status: encoding the status patch: %w", err)
	}
	return out, nil
}
