package sources

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
)

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	t1 = t0.Add(time.Minute)
)

// testPod returns a valid pod ns/name with UID "uid-<name>", changed by opts.
func testPod(name string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "c", Image: "busybox:1"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withUID(uid string) func(*v1.Pod) { return func(p *v1.Pod) { p.UID = types.UID(uid) } }
func withImage(image string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers[0].Image = image }
}
func withLabel(k, v string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}
func withAnnotation(k, v string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}
func withPhase(ph v1.PodPhase) func(*v1.Pod) { return func(p *v1.Pod) { p.Status.Phase = ph } }
func withDeletion(t time.Time) func(*v1.Pod) {
	return func(p *v1.Pod) { ts := metav1.NewTime(t); p.DeletionTimestamp = &ts }
}
func withDeletionGrace(s int64) func(*v1.Pod) {
	return func(p *v1.Pod) { p.DeletionGracePeriodSeconds = &s }
}
func withOwner(name string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: "node-uid"}}
	}
}
func withCreated(t time.Time) func(*v1.Pod) {
	return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}
func withCPULimit(q string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)}
	}
}
func withResourceVersion(rv string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.ResourceVersion = rv }
}
func withNamespace(ns string) func(*v1.Pod) { return func(p *v1.Pod) { p.Namespace = ns } }

// op summarizes a PodUpdate for comparison.
type op struct {
	Op     string
	Source string
	Pods   []string // namespace/name
}

func summarize(us []PodUpdate) []op {
	var out []op
	for _, u := range us {
		o := op{Op: u.Op.String(), Source: u.Source}
		for _, p := range u.Pods {
			o.Pods = append(o.Pods, podmodel.FullName(p))
		}
		out = append(out, o)
	}
	return out
}

func droppedNames(rs []rejection) []string {
	var out []string
	for _, r := range rs {
		if r.pod == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, podmodel.FullName(r.pod))
	}
	return out
}

type snapshot struct {
	source string
	pods   []*v1.Pod
}

func TestStoreMerge(t *testing.T) {
	tests := []struct {
		name string
		// before are merged first; their updates are not checked.
		before []snapshot
		last   snapshot
		want   []op
		// wantDropped are the full names of pods the last snapshot dropped.
		wantDropped []string
		// wantErr are substrings of the drop errors, in order.
		wantErr []string
	}{
		{
			name: "first empty snapshot yields an empty ADD",
			last: snapshot{"file", nil},
			want: []op{{Op: "ADD", Source: "file"}},
		},
		{
			name: "later empty snapshot yields nothing",
			before: []snapshot{
				{"file", nil},
			},
			last: snapshot{"file", nil},
		},
		{
			name: "new pods are ADDed",
			last: snapshot{"api", []*v1.Pod{testPod("a"), testPod("b")}},
			want: []op{{Op: "ADD", Source: "api", Pods: []string{"ns/a", "ns/b"}}},
		},
		{
			name:   "same snapshot again yields nothing",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a")}},
		},
		{
			name:   "a change of resourceVersion alone yields nothing",
			before: []snapshot{{"api", []*v1.Pod{testPod("a", withResourceVersion("1"))}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withResourceVersion("2"))}},
		},
		{
			name:   "semantically equal quantities yield nothing",
			before: []snapshot{{"api", []*v1.Pod{testPod("a", withCPULimit("1"))}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withCPULimit("1000m"))}},
		},
		{
			name:   "pods no longer listed are REMOVEd in name order",
			before: []snapshot{{"api", []*v1.Pod{testPod("c"), testPod("a"), testPod("b")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("b")}},
			want:   []op{{Op: "REMOVE", Source: "api", Pods: []string{"ns/a", "ns/c"}}},
		},
		{
			name:   "a new UID under the same name is REMOVE then ADD",
			before: []snapshot{{"file", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"file", []*v1.Pod{testPod("a", withUID("uid-2"))}},
			want: []op{
				{Op: "REMOVE", Source: "file", Pods: []string{"ns/a"}},
				{Op: "ADD", Source: "file", Pods: []string{"ns/a"}},
			},
		},
		{
			name:   "spec change is an UPDATE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a"), testPod("b")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withImage("busybox:2")), testPod("b")}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "label change is an UPDATE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withLabel("k", "v"))}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "annotation change is an UPDATE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a", withAnnotation("k", "1"))}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withAnnotation("k", "2"))}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "removed annotation is an UPDATE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a", withAnnotation("k", "1"))}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a")}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "the source's config.seen and config.source are ignored",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last: snapshot{"api", []*v1.Pod{testPod("a",
				withAnnotation(AnnotationSeen, "yesterday"), withAnnotation(AnnotationSource, "other"))}},
		},
		{
			name:   "owner references change is an UPDATE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withOwner("node-1"))}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "deletion grace change is an UPDATE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withDeletionGrace(10))}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "status change alone is a RECONCILE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withPhase(v1.PodRunning))}},
			want:   []op{{Op: "RECONCILE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "spec and status change is an UPDATE alone",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withImage("x:2"), withPhase(v1.PodRunning))}},
			want:   []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name:   "deletionTimestamp newly set is a DELETE",
			before: []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:   snapshot{"api", []*v1.Pod{testPod("a", withDeletion(t0), withDeletionGrace(30))}},
			want:   []op{{Op: "DELETE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name: "a further change after DELETE is an UPDATE",
			before: []snapshot{
				{"api", []*v1.Pod{testPod("a")}},
				{"api", []*v1.Pod{testPod("a", withDeletion(t0), withDeletionGrace(30))}},
			},
			last: snapshot{"api", []*v1.Pod{testPod("a", withDeletion(t0), withDeletionGrace(5))}},
			want: []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name: "deletionTimestamp changed while set is an UPDATE",
			before: []snapshot{
				{"api", []*v1.Pod{testPod("a")}},
				{"api", []*v1.Pod{testPod("a", withDeletion(t0))}},
			},
			last: snapshot{"api", []*v1.Pod{testPod("a", withDeletion(t1))}},
			want: []op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name: "the same deletionTimestamp again yields nothing",
			before: []snapshot{
				{"api", []*v1.Pod{testPod("a")}},
				{"api", []*v1.Pod{testPod("a", withDeletion(t0))}},
			},
			last: snapshot{"api", []*v1.Pod{testPod("a", withDeletion(t0))}},
		},
		{
			name: "one snapshot with every op delivers REMOVE ADD UPDATE DELETE RECONCILE",
			before: []snapshot{{"api", []*v1.Pod{
				testPod("gone"), testPod("upd"), testPod("del"), testPod("rec"), testPod("same"),
			}}},
			last: snapshot{"api", []*v1.Pod{
				testPod("rec", withPhase(v1.PodRunning)),
				testPod("del", withDeletion(t0)),
				testPod("upd", withLabel("x", "y")),
				testPod("new"),
				testPod("same"),
			}},
			want: []op{
				{Op: "REMOVE", Source: "api", Pods: []string{"ns/gone"}},
				{Op: "ADD", Source: "api", Pods: []string{"ns/new"}},
				{Op: "UPDATE", Source: "api", Pods: []string{"ns/upd"}},
				{Op: "DELETE", Source: "api", Pods: []string{"ns/del"}},
				{Op: "RECONCILE", Source: "api", Pods: []string{"ns/rec"}},
			},
		},
		{
			name: "first empty snapshot of a second source yields an empty ADD",
			before: []snapshot{
				{"api", []*v1.Pod{testPod("a")}},
			},
			last: snapshot{"file", nil},
			want: []op{{Op: "ADD", Source: "file"}},
		},
		{
			name: "sources are merged independently",
			before: []snapshot{
				{"api", []*v1.Pod{testPod("a")}},
				{"file", []*v1.Pod{testPod("f")}},
			},
			last: snapshot{"api", nil},
			want: []op{{Op: "REMOVE", Source: "api", Pods: []string{"ns/a"}}},
		},
		{
			name: "ADDs sorted by creation time then name",
			last: snapshot{"api", []*v1.Pod{
				testPod("d", withCreated(t1)),
				testPod("c", withCreated(t0)),
				testPod("b", withCreated(t1)),
				testPod("a", withCreated(t1), withNamespace("z")),
				testPod("a", withCreated(t1), withNamespace("y"), withUID("uid-a2")),
			}},
			want: []op{{Op: "ADD", Source: "api", Pods: []string{"ns/c", "y/a", "z/a", "ns/b", "ns/d"}}},
		},
		{
			name: "duplicate full names are dropped after the first",
			last: snapshot{"file", []*v1.Pod{
				testPod("a"),
				testPod("a", withUID("uid-other")),
				testPod("a", withUID("uid-third"), withNamespace("other")),
			}},
			want:        []op{{Op: "ADD", Source: "file", Pods: []string{"ns/a", "other/a"}}},
			wantDropped: []string{"ns/a"},
			wantErr:     []string{`duplicate pod name "ns/a"`},
		},
		{
			name:        "duplicate UIDs are dropped after the first",
			last:        snapshot{"file", []*v1.Pod{testPod("a"), testPod("b", withUID("uid-a"))}},
			want:        []op{{Op: "ADD", Source: "file", Pods: []string{"ns/a"}}},
			wantDropped: []string{"ns/b"},
			wantErr:     []string{`duplicate pod UID "uid-a"`},
		},
		{
			name: "an invalid pod is dropped, the rest is merged",
			last: snapshot{"api", []*v1.Pod{
				testPod("bad", func(p *v1.Pod) { p.Spec.Containers = nil }),
				testPod("good"),
			}},
			want:        []op{{Op: "ADD", Source: "api", Pods: []string{"ns/good"}}},
			wantDropped: []string{"ns/bad"},
			wantErr:     []string{"spec.containers: Required value"},
		},
		{
			name: "an invalid pod does not take its name",
			last: snapshot{"api", []*v1.Pod{
				testPod("a", withImage("")),
				testPod("a", withUID("uid-ok")),
			}},
			want:        []op{{Op: "ADD", Source: "api", Pods: []string{"ns/a"}}},
			wantDropped: []string{"ns/a"},
			wantErr:     []string{"spec.containers[0].image: Required value"},
		},
		{
			name:        "a nil pod is dropped",
			last:        snapshot{"api", []*v1.Pod{nil, testPod("a")}},
			want:        []op{{Op: "ADD", Source: "api", Pods: []string{"ns/a"}}},
			wantDropped: []string{"<nil>"},
			wantErr:     []string{"nil pod at index 0"},
		},
		{
			name:        "a stored pod that turns invalid is REMOVEd",
			before:      []snapshot{{"api", []*v1.Pod{testPod("a")}}},
			last:        snapshot{"api", []*v1.Pod{testPod("a", withImage(""))}},
			want:        []op{{Op: "REMOVE", Source: "api", Pods: []string{"ns/a"}}},
			wantDropped: []string{"ns/a"},
			wantErr:     []string{"image"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore()
			for _, b := range tt.before {
				s.merge(b.source, b.pods, t0)
			}
			got, dropped := s.merge(tt.last.source, tt.last.pods, t1)
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDropped, droppedNames(dropped)); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			for i, sub := range tt.wantErr {
				if i >= len(dropped) || !strings.Contains(dropped[i].err.Error(), sub) {
					t.Errorf("dropped[%d] error does not contain %q: %v", i, sub, dropped)
				}
			}
		})
	}
}

func TestStoreMergeAnnotations(t *testing.T) {
	s := newStore()
	got, _ := s.merge("file", []*v1.Pod{testPod("a", withAnnotation("k", "v"))}, t0)
	added := got[0].Pods[0]
	want := map[string]string{
		"k":              "v",
		AnnotationSource: "file",
		AnnotationSeen:   t0.Format(time.RFC3339Nano),
	}
	if diff := cmp.Diff(want, added.Annotations); diff != "" {
		t.Errorf("ADD annotations (-want +got):\n%s", diff)
	}

	got, _ = s.merge("file", []*v1.Pod{testPod("a", withAnnotation("k", "w"))}, t1)
	updated := got[0].Pods[0]
	want["k"] = "w"
	if diff := cmp.Diff(want, updated.Annotations); diff != "" {
		t.Errorf("UPDATE annotations keep the first-seen time (-want +got):\n%s", diff)
	}

	got, _ = s.merge("file", []*v1.Pod{testPod("a", withAnnotation("k", "w"), withPhase(v1.PodRunning))}, t1)
	if diff := cmp.Diff(want, got[0].Pods[0].Annotations); diff != "" {
		t.Errorf("RECONCILE annotations keep the first-seen time (-want +got):\n%s", diff)
	}
}

// TestStoreMergeSharesAnnotations checks that the pods a snapshot adds
// without annotations of their own share one map of the merge's
// annotations, that the source's own config.seen and config.source do not
// reach the store, and that a pod with annotations of its own gets its own
// map, the source's left as it was.
func TestStoreMergeSharesAnnotations(t *testing.T) {
	s := newStore()
	in := []*v1.Pod{
		testPod("a"),
		testPod("b", withAnnotation(AnnotationSeen, "yesterday"), withAnnotation(AnnotationSource, "other")),
		testPod("c", withAnnotation("k", "v")),
	}
	got, _ := s.merge("api", in, t0)
	if len(got) != 1 || len(got[0].Pods) != 3 {
		t.Fatalf("merge = %v, want one ADD of 3 pods", got)
	}
	a, b, c := got[0].Pods[0], got[0].Pods[1], got[0].Pods[2]
	want := map[string]string{AnnotationSource: "api", AnnotationSeen: t0.Format(time.RFC3339Nano)}
	for _, p := range []*v1.Pod{a, b} {
		if diff := cmp.Diff(want, p.Annotations); diff != "" {
			t.Errorf("%s annotations (-want +got):\n%s", p.Name, diff)
		}
	}
	if reflect.ValueOf(a.Annotations).UnsafePointer() != reflect.ValueOf(b.Annotations).UnsafePointer() {
		t.Error("pods added together without annotations of their own hold one map each, want one shared map")
	}
	want["k"] = "v"
	if diff := cmp.Diff(want, c.Annotations); diff != "" {
		t.Errorf("c annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"k": "v"}, in[2].Annotations); diff != "" {
		t.Errorf("the source's annotations changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{AnnotationSeen: "yesterday", AnnotationSource: "other"}, in[1].Annotations); diff != "" {
		t.Errorf("the source's annotations changed (-want +got):\n%s", diff)
	}

	// A later snapshot adding a pod stamps it with its own time; the pods
	// of the first keep theirs.
	got, _ = s.merge("api", append(in, testPod("d")), t1)
	if len(got) != 1 || len(got[0].Pods) != 1 {
		t.Fatalf("merge = %v, want one ADD of 1 pod", got)
	}
	if seen := got[0].Pods[0].Annotations[AnnotationSeen]; seen != t1.Format(time.RFC3339Nano) {
		t.Errorf("d config.seen = %q, want %q", seen, t1.Format(time.RFC3339Nano))
	}
	if seen := a.Annotations[AnnotationSeen]; seen != t0.Format(time.RFC3339Nano) {
		t.Errorf("a config.seen = %q after a later ADD, want %q", seen, t0.Format(time.RFC3339Nano))
	}
}

// TestStoreMergeSharesEmptySecurityContext: the pods whose
// spec.securityContext is set and empty share one, in every snapshot; a
// pod with a security context of its own keeps a copy of it; a pod
// without one keeps none.
func TestStoreMergeSharesEmptySecurityContext(t *testing.T) {
	withSC := func(sc *v1.PodSecurityContext) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.SecurityContext = sc }
	}
	user := int64(1000)
	s := newStore()
	in := []*v1.Pod{
		testPod("a", withSC(&v1.PodSecurityContext{})),
		testPod("b", withSC(&v1.PodSecurityContext{RunAsUser: &user})),
		testPod("c"),
	}
	got, _ := s.merge("api", in, t0)
	got2, _ := s.merge("api", append(in, testPod("d", withSC(&v1.PodSecurityContext{}))), t1)
	if len(got) != 1 || len(got[0].Pods) != 3 || len(got2) != 1 || len(got2[0].Pods) != 1 {
		t.Fatalf("merges = %v then %v, want an ADD of 3 pods then of 1", got, got2)
	}
	a, b, c, d := got[0].Pods[0], got[0].Pods[1], got[0].Pods[2], got2[0].Pods[0]
	if a.Spec.SecurityContext == nil || a.Spec.SecurityContext == in[0].Spec.SecurityContext ||
		!reflect.ValueOf(a.Spec.SecurityContext).Elem().IsZero() {
		t.Errorf("a's security context %v, want an empty one of the store's", a.Spec.SecurityContext)
	}
	if d.Spec.SecurityContext != a.Spec.SecurityContext {
		t.Error("d's empty security context is not a's, want one shared")
	}
	if b.Spec.SecurityContext == in[1].Spec.SecurityContext || b.Spec.SecurityContext.RunAsUser == in[1].Spec.SecurityContext.RunAsUser ||
		*b.Spec.SecurityContext.RunAsUser != 1000 {
		t.Errorf("b's security context %v, want a copy of the source's", b.Spec.SecurityContext)
	}
	if c.Spec.SecurityContext != nil {
		t.Errorf("c's security context %v, want none", c.Spec.SecurityContext)
	}
	if in[0].Spec.SecurityContext == nil {
		t.Error("the source's pod lost its security context")
	}
}

func BenchmarkStoreMergeAdd(b *testing.B) {
	pods := make([]*v1.Pod, 1000)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("p%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		newStore().merge("api", pods, t0)
	}
}

func TestStoreMergeOwnsItsPods(t *testing.T) {
	s := newStore()
	in := testPod("a")
	got, _ := s.merge("api", []*v1.Pod{in, testPod("b")}, t0)
	stored := got[0].Pods[0]
	if stored == in {
		t.Fatal("ADD delivered the source's object, want a copy")
	}
	if in.Annotations != nil {
		t.Errorf("merge annotated the source's object: %v", in.Annotations)
	}
	in.Spec.Containers[0].Image = "changed-by-source"
	if stored.Spec.Containers[0].Image != "busybox:1" {
		t.Errorf("stored pod follows the source's object: image %q", stored.Spec.Containers[0].Image)
	}

	// An unchanged pod keeps its object; a changed one gets a new object and
	// the delivered old one is left as it was.
	storedB := got[0].Pods[1]
	got, _ = s.merge("api", []*v1.Pod{testPod("a", withImage("busybox:2")), testPod("b")}, t1)
	if diff := cmp.Diff([]op{{Op: "UPDATE", Source: "api", Pods: []string{"ns/a"}}}, summarize(got)); diff != "" {
		t.Fatalf("updates (-want +got):\n%s", diff)
	}
	if got[0].Pods[0] == stored {
		t.Error("UPDATE reused the delivered object, want a new one")
	}
	if stored.Spec.Containers[0].Image != "busybox:1" {
		t.Errorf("UPDATE modified the previously delivered object: image %q", stored.Spec.Containers[0].Image)
	}
	if s.pods["api"]["uid-b"] != storedB {
		t.Error("unchanged pod lost its object identity")
	}
}

// readOnlySource is a chanSource whose pods are never modified once sent.
type readOnlySource chan []*v1.Pod

func (c readOnlySource) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	return Chan(c).Run(ctx, snapshots)
}

func (readOnlySource) PodsReadOnly() bool { return true }

// The pods of a source that says its pods are read-only (ReadOnlyPods)
// share their spec, metadata and status with the source's objects; the
// merge's own annotations are on a Pod of the merge's, and the source's
// object is left as it was. Other sources' pods are deep copies.
func TestConfigSharesReadOnlyPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		roIn, fileIn := make(readOnlySource), make(chan []*v1.Pod)
		c := NewConfig(ConfigOptions{})
		if err := c.Add(APIServerSource, roIn); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(FileSource, chanSource(fileIn)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		defer func() { cancel(); <-done }()

		in := testPod("a")
		roIn <- []*v1.Pod{in}
		got := (<-c.Updates()).Pods[0]
		if got == in || in.Annotations != nil || got.Annotations[AnnotationSource] != APIServerSource {
			t.Errorf("stored %p (source's %p), source's annotations %v, stored %v; want a Pod of the merge's, the source's unchanged", got, in, in.Annotations, got.Annotations)
		}
		if &got.Spec.Containers[0] != &in.Spec.Containers[0] || !reflect.DeepEqual(got.Spec, in.Spec) {
			t.Error("the read-only source's pod was copied deeply, want its spec shared")
		}

		// A change is a new object from the source: an UPDATE with it.
		changed := testPod("a", withImage("busybox:2"))
		roIn <- []*v1.Pod{changed}
		up := <-c.Updates()
		if up.Op != Update || up.Pods[0].Spec.Containers[0].Image != "busybox:2" || got.Spec.Containers[0].Image != "busybox:1" {
			t.Errorf("update %v with image %q, the first delivered now %q; want an UPDATE to busybox:2, the first unchanged", up.Op, up.Pods[0].Spec.Containers[0].Image, got.Spec.Containers[0].Image)
		}

		fin := testPod("b")
		fileIn <- []*v1.Pod{fin}
		fgot := (<-c.Updates()).Pods[0]
		if &fgot.Spec.Containers[0] == &fin.Spec.Containers[0] {
			t.Error("the file source's pod shares its spec, want a deep copy")
		}
	})
}

func BenchmarkStoreMergeAddReadOnly(b *testing.B) {
	pods := make([]*v1.Pod, 1000)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("p%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		s := newStore()
		s.readOnly["api"] = true
		s.merge("api", pods, t0)
	}
}
