package sources

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
)

// store is the pure core of the merge, the kubelet's podStorage: the pods of
// every source by UID, and the sources that delivered a snapshot. merge
// turns one full snapshot into the PodUpdates it implies. store does no I/O,
// keeps no clock and is not safe for concurrent use; Config owns one.
//
// The pods store holds are its own deep copies of what sources sent
// (shallow copies for the sources in readOnly). It hands the same objects
// out in PodUpdates and never modifies one after storing it: a change
// stores a new object, an unchanged pod keeps its object (pointer identity
// is stable across snapshots).
type store struct {
	pods map[string]map[types.UID]*v1.Pod
	seen map[string]bool
	// readOnly holds the sources whose pods are never modified once sent
	// (ReadOnlyPods): their copies share all but the Pod and its
	// annotations with the source's objects.
	readOnly map[string]bool
	// emptySecurityContext is the spec.securityContext of the pods whose
	// one is set and empty (the API server sets {} on every pod it
	// serves), shared by all of them; nil until the first.
	emptySecurityContext *v1.PodSecurityContext
}

// rejection is a pod a snapshot held that the merge dropped.
type rejection struct {
	// pod is the object as the source sent it (nil for a nil entry).
	pod *v1.Pod
	err error
}

func newStore() *store {
	return &store{pods: map[string]map[types.UID]*v1.Pod{}, seen: map[string]bool{}, readOnly: map[string]bool{}}
}

// change is what a new version of a stored pod amounts to.
type change int

const (
	unchanged change = iota
	changeUpdate
	changeDelete
	changeReconcile
)

// merge replaces the pods of source with snapshot, a full list, and returns
// the updates it implies in delivery order (REMOVE, ADD, UPDATE, DELETE,
// RECONCILE; only non-empty ones), and the pods it dropped.
//
// The first snapshot of a source that yields no ADD, UPDATE or DELETE yields
// an empty ADD (before any RECONCILE), as the kubelet does, so that a
// consumer sees every source at least once.
//
// now stamps the config.seen annotation of new pods.
func (s *store) merge(source string, snapshot []*v1.Pod, now time.Time) ([]PodUpdate, []rejection) {
	old := s.pods[source]
	next := make(map[types.UID]*v1.Pod, len(snapshot))
	names := make(map[string]bool, len(snapshot))
	var (
		adds, updates, deletes, removes, reconciles []*v1.Pod
		dropped                                     []rejection
		// seenNow is now in the config.seen annotation's form, formatted
		// once for all the pods the snapshot adds.
		seenNow string
	)
	cp := podCopier{store: s, source: source}
	for i, in := range snapshot {
		if in == nil {
			dropped = append(dropped, rejection{err: fmt.Errorf("sources: nil pod at index %d", i)})
			continue
		}
		if err := Validate(in); err != nil {
			dropped = append(dropped, rejection{pod: in, err: err})
			continue
		}
		full := podmodel.FullName(in)
		if names[full] {
			dropped = append(dropped, rejection{pod: in, err: fmt.Errorf("sources: duplicate pod name %q, keeping the first", full)})
			continue
		}
		if _, dup := next[in.UID]; dup {
			dropped = append(dropped, rejection{pod: in, err: fmt.Errorf("sources: duplicate pod UID %q, keeping the first", in.UID)})
			continue
		}
		names[full] = true

		existing, found := old[in.UID]
		if !found {
			if seenNow == "" {
				seenNow = now.Format(time.RFC3339Nano)
			}
			p := cp.copyPod(in, seenNow, true)
			next[p.UID] = p
			adds = append(adds, p)
			continue
		}
		ch := classify(existing, in)
		if ch == unchanged {
			next[existing.UID] = existing
			continue
		}
		seen, hasSeen := existing.Annotations[AnnotationSeen]
		p := cp.copyPod(in, seen, hasSeen)
		next[p.UID] = p
		switch ch {
		case changeUpdate:
			updates = append(updates, p)
		case changeDelete:
			deletes = append(deletes, p)
		case changeReconcile:
			reconciles = append(reconciles, p)
		}
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removes = append(removes, p)
		}
	}
	// Map order is random; deliver removals in name order.
	slices.SortFunc(removes, func(a, b *v1.Pod) int { return cmp.Compare(podmodel.FullName(a), podmodel.FullName(b)) })
	// The kubelet admits pods oldest first.
	slices.SortStableFunc(adds, func(a, b *v1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace))
	})

	s.pods[source] = next
	first := !s.seen[source]
	s.seen[source] = true

	var out []PodUpdate
	add := func(op Op, pods []*v1.Pod) {
		if len(pods) > 0 {
			out = append(out, PodUpdate{Op: op, Pods: pods, Source: source})
		}
	}
	add(Remove, removes)
	add(Add, adds)
	add(Update, updates)
	add(Delete, deletes)
	if first && len(adds) == 0 && len(updates) == 0 && len(deletes) == 0 {
		out = append(out, PodUpdate{Op: Add, Source: source})
	}
	add(Reconcile, reconciles)
	return out, dropped
}

// classify compares a stored pod with the version a snapshot holds.
//
// A semantic change (spec, labels, annotations other than the merge's own,
// deletionGracePeriodSeconds, ownerReferences, deletionTimestamp) is a
// DELETE when it sets deletionTimestamp and an UPDATE otherwise; a change
// of status alone is a RECONCILE.
func classify(existing, in *v1.Pod) change {
	eq := equality.Semantic.DeepEqual
	semantic := !eq(existing.Spec, in.Spec) ||
		!eq(existing.Labels, in.Labels) ||
		!annotationsEqual(existing.Annotations, in.Annotations) ||
		!eq(existing.DeletionGracePeriodSeconds, in.DeletionGracePeriodSeconds) ||
		!eq(existing.OwnerReferences, in.OwnerReferences) ||
		!eq(existing.DeletionTimestamp, in.DeletionTimestamp)
	switch {
	case semantic && existing.DeletionTimestamp == nil && in.DeletionTimestamp != nil:
		return changeDelete
	case semantic:
		return changeUpdate
	case !eq(existing.Status, in.Status):
		return changeReconcile
	}
	return unchanged
}

// isMergeAnnotation reports the annotations the merge sets itself; a source's
// value for them is ignored when comparing.
func isMergeAnnotation(key string) bool {
	return key == AnnotationSeen || key == AnnotationSource
}

func annotationsEqual(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if isMergeAnnotation(k) {
			continue
		}
		n++
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	for k := range b {
		if !isMergeAnnotation(k) {
			n--
		}
	}
	return n == 0
}

// podCopier makes the store's copies of the pods of one snapshot, with
// the merge's annotations (config.source, config.seen).
//
// The copies share their parts that are equal in many pods and cost each
// pod a few hundred bytes for as long as it runs: the annotations of the
// pods a snapshot adds at once without annotations of their own, and an
// empty spec.securityContext. The store's pods are read-only, so sharing
// is invisible to their readers.
type podCopier struct {
	store  *store
	source string
	// shared holds, by config.seen value, the annotations of the pods that
	// bring none of their own.
	shared map[string]map[string]string
}

// copyPod returns the store's copy of in: a deep copy (a shallow one for a
// read-only source) whose annotations are in's (less a config.seen or
// config.source of the source's own) with config.source, and config.seen
// set to seen when hasSeen.
func (a *podCopier) copyPod(in *v1.Pod, seen string, hasSeen bool) *v1.Pod {
	own := 0
	for k := range in.Annotations {
		if !isMergeAnnotation(k) {
			own++
		}
	}
	// Copy the pod without its annotations, then build them at their final
	// size: copying the source's map and adding to it would grow it.
	shallow := *in
	shallow.Annotations = nil
	sc := in.Spec.SecurityContext
	emptySC := sc != nil && reflect.ValueOf(sc).Elem().IsZero()
	if emptySC {
		shallow.Spec.SecurityContext = nil
	}
	p := &shallow
	if !a.store.readOnly[a.source] {
		p = shallow.DeepCopy()
	}
	if emptySC {
		if a.store.emptySecurityContext == nil {
			a.store.emptySecurityContext = &v1.PodSecurityContext{}
		}
		p.Spec.SecurityContext = a.store.emptySecurityContext
	}
	if own == 0 && hasSeen {
		m, ok := a.shared[seen]
		if !ok {
			m = map[string]string{AnnotationSource: a.source, AnnotationSeen: seen}
			if a.shared == nil {
				a.shared = map[string]map[string]string{}
			}
			a.shared[seen] = m
		}
		p.Annotations = m
		return p
	}
	m := make(map[string]string, own+2)
	for k, v := range in.Annotations {
		if !isMergeAnnotation(k) {
			m[k] = v
		}
	}
	m[AnnotationSource] = a.source
	if hasSeen {
		m[AnnotationSeen] = seen
	}
	p.Annotations = m
	return p
}
