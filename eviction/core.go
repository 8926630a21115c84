package eviction

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Observation is one signal's observed value.
type Observation struct {
	Available int64
	Capacity  int64
}

// Observations are the signals observed at one time; a signal without
// data is absent, and no threshold of it is met.
type Observations map[Signal]Observation

// Observe turns stats into observations. Missing data gives no
// observation: the manager never acts on what it could not measure.
func Observe(s *Stats) Observations {
	obs := Observations{}
	if s == nil {
		return obs
	}
	if m := s.Memory; m != nil && m.Capacity > 0 {
		obs[SignalMemoryAvailable] = Observation{Available: int64(m.Available), Capacity: int64(m.Capacity)}
	}
	fs := func(f *FsStats, bytes, inodes Signal) {
		if f == nil {
			return
		}
		if f.CapacityBytes > 0 {
			obs[bytes] = Observation{Available: int64(min(f.AvailableBytes, f.CapacityBytes)), Capacity: int64(f.CapacityBytes)}
		}
		if f.Inodes > 0 {
			obs[inodes] = Observation{Available: int64(min(f.InodesFree, f.Inodes)), Capacity: int64(f.Inodes)}
		}
	}
	fs(s.NodeFs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if s.ImageFs != nil {
		fs(s.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	} else {
		// The image file system is the node's, as the kubelet assumes
		// when the runtime does not tell it apart.
		fs(s.NodeFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	}
	if p := s.PIDs; p != nil && p.Capacity > 0 {
		obs[SignalPIDAvailable] = Observation{Available: int64(min(p.Available, p.Capacity)), Capacity: int64(p.Capacity)}
	}
	return obs
}

// thresholdsMet returns the thresholds whose signal is below their
// amount (plus the minimum reclaim with enforceMinReclaim).
func thresholdsMet(thresholds []Threshold, obs Observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		amount := t.Value.amount(o.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			amount += t.MinReclaim.amount(o.Capacity)
		}
		if amount > o.Available {
			out = append(out, t)
		}
	}
	return out
}

// key identifies a threshold across synchronizations.
func (t Threshold) key() string { return t.String() }

func mergeThresholds(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.ContainsFunc(out, func(o Threshold) bool { return o.key() == t.key() }) {
			out = append(out, t)
		}
	}
	return out
}

// conditionOf is the node condition a signal's pressure sets.
func conditionOf(s Signal) v1.NodeConditionType {
	switch s {
	case SignalMemoryAvailable:
		return v1.NodeMemoryPressure
	case SignalPIDAvailable:
		return v1.NodePIDPressure
	default:
		return v1.NodeDiskPressure
	}
}

// resourceOf is the resource a signal's reclaim frees, as the kubelet
// names it in its messages.
func resourceOf(s Signal) v1.ResourceName {
	switch s {
	case SignalMemoryAvailable:
		return v1.ResourceMemory
	case SignalNodeFsAvailable, SignalImageFsAvailable:
		return v1.ResourceEphemeralStorage
	case SignalNodeFsInodesFree, SignalImageFsInodesFree:
		return "inodes"
	default:
		return "pids"
	}
}

// State is what the manager remembers between synchronizations: the
// kubelet's thresholdsFirstObservedAt, nodeConditionsLastObservedAt and
// thresholdsMet. It is pure data; Step computes the next one.
type State struct {
	FirstObserved map[string]time.Time
	// ConditionLastObserved is when each pressure was last observed.
	ConditionLastObserved map[v1.NodeConditionType]time.Time
	// Met are the thresholds met (grace periods passed) at the last step;
	// they stay met until the signal is back above them plus their
	// minimum reclaim.
	Met []Threshold
	// Conditions are the node's pressure conditions.
	Conditions []v1.NodeConditionType
}

// Step is one synchronization's decision, the kubelet's synchronize up to
// the choice of what to reclaim: the thresholds met now, or still
// unresolved by their minimum reclaim; those met longer than their grace
// period; the node conditions, kept for transitionPeriod after their
// signal was last under pressure. It returns the next state and the
// thresholds to act on, memory first. It does no I/O.
func Step(now time.Time, thresholds []Threshold, obs Observations, prev State, transitionPeriod time.Duration) (State, []Threshold) {
	met := thresholdsMet(thresholds, obs, false)
	if len(prev.Met) > 0 {
		met = mergeThresholds(met, thresholdsMet(prev.Met, obs, true))
	}
	next := State{FirstObserved: map[string]time.Time{}, ConditionLastObserved: map[v1.NodeConditionType]time.Time{}}
	for _, t := range met {
		first, ok := prev.FirstObserved[t.key()]
		if !ok {
			first = now
		}
		next.FirstObserved[t.key()] = first
	}
	var acting []Threshold
	for _, t := range met {
		if now.Sub(next.FirstObserved[t.key()]) >= t.GracePeriod {
			acting = append(acting, t)
		}
	}
	// Conditions come from every threshold met, grace periods or not, as
	// with the kubelet: a soft threshold shows pressure before it evicts.
	for c, at := range prev.ConditionLastObserved {
		next.ConditionLastObserved[c] = at
	}
	for _, t := range met {
		next.ConditionLastObserved[conditionOf(t.Signal)] = now
	}
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		at, ok := next.ConditionLastObserved[c]
		if !ok {
			continue
		}
		if now.Sub(at) < transitionPeriod || at.Equal(now) {
			next.Conditions = append(next.Conditions, c)
		} else {
			delete(next.ConditionLastObserved, c)
		}
	}
	next.Met = acting
	slices.SortStableFunc(acting, byReclaimOrder)
	return next, acting
}

// thresholdInfo is the amount and the observed value of the threshold a
// reclaim of resource acts on, for the eviction message.
func thresholdInfo(r v1.ResourceName, thresholds []Threshold, obs Observations) (amount, available *resource.Quantity) {
	for _, t := range thresholds {
		if resourceOf(t.Signal) != r {
			continue
		}
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		format := resource.BinarySI
		if r != v1.ResourceMemory && r != v1.ResourceEphemeralStorage {
			format = resource.DecimalSI
		}
		return resource.NewQuantity(t.Value.amount(o.Capacity), format), resource.NewQuantity(o.Available, format)
	}
	return nil, nil
}
