package eviction

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, named as the kubelet names it.
type Signal string

// The signals the manager observes.
const (
	// SignalMemoryAvailable is the node's memory capacity minus its working
	// set (usage less inactive file pages of the root cgroup).
	SignalMemoryAvailable Signal = "memory.available"
	// SignalNodeFsAvailable is the free space of the node's file system
	// (the agent's root directory, pod logs, emptyDirs).
	SignalNodeFsAvailable Signal = "nodefs.available"
	// SignalNodeFsInodesFree is the free inodes of that file system.
	SignalNodeFsInodesFree Signal = "nodefs.inodesFree"
	// SignalImageFsAvailable is the free space of the runtime's image file
	// system.
	SignalImageFsAvailable Signal = "imagefs.available"
	// SignalImageFsInodesFree is the free inodes of that file system.
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	// SignalPIDAvailable is the number of process IDs left.
	SignalPIDAvailable Signal = "pid.available"
)

var signals = []Signal{SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable, SignalImageFsInodesFree, SignalPIDAvailable}

// Value is a threshold's amount: a quantity, or a percentage of the
// signal's capacity.
type Value struct {
	Quantity *resource.Quantity
	// Percentage, in [0, 1], when Quantity is nil.
	Percentage float32
}

// amount is the value's amount at capacity.
func (v Value) amount(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * float64(v.Percentage))
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	// Rounded to the precision of a float32 percentage.
	return strconv.FormatFloat(math.Round(float64(v.Percentage)*1e6)/1e4, 'f', -1, 64) + "%"
}

// Threshold is an eviction threshold: the signal below Value. A hard
// threshold (GracePeriod 0) acts at once; a soft one once it was met for
// GracePeriod.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is 0 for a hard threshold.
	GracePeriod time.Duration
	// MinReclaim is how far below the threshold the signal must get back
	// before the threshold counts as resolved. Defaults to none.
	MinReclaim *Value
}

// Hard reports whether the threshold is a hard one.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string {
	s := string(t.Signal) + "<" + t.Value.String()
	if !t.Hard() {
		s += " for " + t.GracePeriod.String()
	}
	return s
}

// DefaultHard are the kubelet's default hard thresholds on Linux.
func DefaultHard() []Threshold {
	q := resource.MustParse("100Mi")
	return []Threshold{
		{Signal: SignalMemoryAvailable, Value: Value{Quantity: &q}},
		{Signal: SignalNodeFsAvailable, Value: Value{Percentage: 0.1}},
		{Signal: SignalNodeFsInodesFree, Value: Value{Percentage: 0.05}},
		{Signal: SignalImageFsAvailable, Value: Value{Percentage: 0.15}},
	}
}

// Config is the kubelet's configuration of eviction, as maps of signal
// to value (its evictionHard, evictionSoft, evictionSoftGracePeriod and
// evictionMinimumReclaim).
type Config struct {
	Hard            map[string]string
	Soft            map[string]string
	SoftGracePeriod map[string]string
	MinimumReclaim  map[string]string
}

// ParseThresholds parses a Config as the kubelet does: values are
// quantities ("100Mi", "1000") or percentages ("10%"); every soft
// threshold needs a grace period; a minimum reclaim applies to the hard
// and soft thresholds of its signal. A nil Hard gives DefaultHard; an
// empty (non-nil) one, none.
func ParseThresholds(c Config) ([]Threshold, error) {
	var out []Threshold
	if c.Hard == nil {
		out = DefaultHard()
	}
	for _, sig := range sortedKeys(c.Hard) {
		v, err := parseValue(sig, c.Hard[sig])
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		out = append(out, Threshold{Signal: Signal(sig), Value: *v})
	}
	for _, sig := range sortedKeys(c.Soft) {
		v, err := parseValue(sig, c.Soft[sig])
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		gs, ok := c.SoftGracePeriod[sig]
		if !ok {
			return nil, fmt.Errorf("eviction: grace period must be specified for the soft eviction threshold %s", sig)
		}
		g, err := time.ParseDuration(gs)
		if err != nil || g <= 0 {
			return nil, fmt.Errorf("eviction: invalid soft eviction grace period %s=%q: must be a positive duration", sig, gs)
		}
		out = append(out, Threshold{Signal: Signal(sig), Value: *v, GracePeriod: g})
	}
	for sig := range c.SoftGracePeriod {
		if _, ok := c.Soft[sig]; !ok {
			return nil, fmt.Errorf("eviction: grace period for %s has no soft eviction threshold", sig)
		}
	}
	for _, sig := range sortedKeys(c.MinimumReclaim) {
		v, err := parseValue(sig, c.MinimumReclaim[sig])
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		for i := range out {
			if out[i].Signal == Signal(sig) {
				mr := *v
				out[i].MinReclaim = &mr
			}
		}
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// parseValue parses one value of signal sig; nil for a percentage of 0
// (the kubelet's way of turning a default off).
func parseValue(sig, s string) (*Value, error) {
	if !slices.Contains(signals, Signal(sig)) {
		return nil, fmt.Errorf("eviction: unsupported eviction signal %q", sig)
	}
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 32)
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return nil, fmt.Errorf("eviction: invalid percentage %s=%q", sig, s)
		}
		if f == 0 {
			return nil, nil
		}
		return &Value{Percentage: float32(f / 100)}, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil, fmt.Errorf("eviction: invalid quantity %s=%q: %w", sig, s, err)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("eviction: negative threshold %s=%q", sig, s)
	}
	return &Value{Quantity: &q}, nil
}

// HardReservation is what the hard thresholds of memory.available and
// nodefs.available hold back from pods at capacity: the kubelet subtracts
// it from the capacity to give the allocatable resources.
func HardReservation(thresholds []Threshold, capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, t := range thresholds {
		if !t.Hard() {
			continue
		}
		var name v1.ResourceName
		switch t.Signal {
		case SignalMemoryAvailable:
			name = v1.ResourceMemory
		case SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c := capacity[name]
		out[name] = *resource.NewQuantity(t.Value.amount(c.Value()), resource.BinarySI)
	}
	return out
}

// Validate checks thresholds given directly (not parsed).
func Validate(thresholds []Threshold) error {
	var errs []error
	for _, t := range thresholds {
		if !slices.Contains(signals, t.Signal) {
			errs = append(errs, fmt.Errorf("eviction: unsupported eviction signal %q", t.Signal))
		}
		if t.GracePeriod < 0 {
			errs = append(errs, fmt.Errorf("eviction: negative grace period of %s", t))
		}
		for _, v := range []*Value{&t.Value, t.MinReclaim} {
			if v == nil {
				continue
			}
			if v.Quantity == nil && (v.Percentage < 0 || v.Percentage > 1) {
				errs = append(errs, fmt.Errorf("eviction: percentage of %s out of [0, 100]", t.Signal))
			}
			if v.Quantity != nil && v.Quantity.Sign() < 0 {
				errs = append(errs, fmt.Errorf("eviction: negative quantity of %s", t.Signal))
			}
		}
	}
	return errors.Join(errs...)
}

// signalOrder is the order in which the kubelet reclaims: memory first.
func signalOrder(s Signal) int {
	if s == SignalMemoryAvailable {
		return 0
	}
	return 1
}

func byReclaimOrder(a, b Threshold) int {
	return cmp.Compare(signalOrder(a.Signal), signalOrder(b.Signal))
}
