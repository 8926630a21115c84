package mirror

import (
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status/statustest"
)

const testNode = "node-a"

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-uid-" + name)}}
}

func static(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID(hash),
			Labels: map[string]string{"tier": "control-plane"},
			Annotations: map[string]string{
				sources.AnnotationSource: sources.FileSource,
				sources.AnnotationHash:   hash,
				sources.AnnotationSeen:   "2026-01-01T00:00:00Z",
			}},
		Spec: v1.PodSpec{NodeName: testNode, Containers: []v1.Container{{Name: "c", Image: "img:" + hash}}},
	}
}

// mirrorPod is the mirror pod of s with the given hash as the API server
// holds it.
func mirrorPod(s *v1.Pod, hash string) *v1.Pod {
	m := newMirrorPod(s, testNode, "node-uid-"+testNode)
	m.Annotations[sources.AnnotationMirror] = hash
	return m
}

func apiPod(namespace, name, nodeName string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
}

func newManager(t *testing.T, f *statustest.FakeAPI, opts Options) *Manager {
	t.Helper()
	opts.NodeName = testNode
	opts.Logger = testr.New(t)
	m, err := New(clientset.From(f), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eachReadMode runs test as a subtest for each way Sync reads the node's
// pods: by listing them ("list"), and from Options.Pods ("cache") set to
// liveCache, after which the test checks that the manager sent no list.
// test builds its manager with newModeManager.
func eachReadMode(t *testing.T, test func(t *testing.T, cached bool)) {
	for _, cached := range []bool{false, true} {
		name := "list"
		if cached {
			name = "cache"
		}
		t.Run(name, func(t *testing.T) { test(t, cached) })
	}
}

// newModeManager is newManager, with Options.Pods set to liveCache(f) if
// cached; the test then fails if the manager lists.
func newModeManager(t *testing.T, f *statustest.FakeAPI, opts Options, cached bool) *Manager {
	t.Helper()
	if !cached {
		return newManager(t, f, opts)
	}
	opts.Pods = liveCache(f)
	m := newManager(t, f, opts)
	t.Cleanup(func() {
		if n := m.Stats().Lists; n != 0 {
			t.Errorf("%d lists with a synced cache, want 0", n)
		}
	})
	return m
}

// storedPods returns the pods the fake API server holds, of every node,
// read without a request.
func storedPods(f *statustest.FakeAPI) ([]*v1.Pod, error) {
	o, err := f.Tracker().List(v1.SchemeGroupVersion.WithResource("pods"), v1.SchemeGroupVersion.WithKind("Pod"), metav1.NamespaceAll)
	if err != nil {
		return nil, err
	}
	list := o.(*v1.PodList)
	pods := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// liveCache is an Options.Pods that never lags: at each call it returns
// the pods the fake API server holds, including those of other nodes,
// which the manager must ignore.
func liveCache(f *statustest.FakeAPI) func() ([]*v1.Pod, bool) {
	return func() ([]*v1.Pod, bool) {
		pods, err := storedPods(f)
		return pods, err == nil
	}
}

func TestSyncCreatesMirrorPod(t *testing.T) {
	f := statustest.NewFakeAPI(node(testNode))
	var created []string
	m := newManager(t, f, Options{OnCreate: func(s, mp *v1.Pod) { created = append(created, string(s.UID)+"->"+mp.Name) }})
	s := static("etcd-node-a", "h1")
	if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
		t.Fatal(err)
	}

	got := f.Pod("kube-system", "etcd-node-a")
	if got == nil {
		t.Fatal("no mirror pod in the API server")
	}
	controller := true
	want := metav1.ObjectMeta{
		Namespace: "kube-system", Name: "etcd-node-a",
		Labels: map[string]string{"tier": "control-plane"},
		Annotations: map[string]string{
			sources.AnnotationSource: sources.FileSource,
			sources.AnnotationHash:   "h1",
			sources.AnnotationSeen:   "2026-01-01T00:00:00Z",
			sources.AnnotationMirror: "h1",
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "node-uid-" + testNode, Controller: &controller}},
	}
	opt := cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".UID", ".ResourceVersion", ".CreationTimestamp", ".ManagedFields":
			return len(p) == 2
		}
		return false
	}, cmp.Ignore())
	if diff := cmp.Diff(want, got.ObjectMeta, opt); diff != "" {
		t.Errorf("mirror pod metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s.Spec, got.Spec); diff != "" {
		t.Errorf("mirror pod spec (-want +got):\n%s", diff)
	}
	if got.UID == s.UID {
		t.Errorf("mirror pod has the static pod's UID; want the API server's")
	}
	if diff := cmp.Diff([]string{"h1->etcd-node-a"}, created); diff != "" {
		t.Errorf("OnCreate calls (-want +got):\n%s", diff)
	}
	mp, ok := m.MirrorPod(s)
	if !ok || mp.UID != got.UID {
		t.Errorf("MirrorPod() = %v, %v; want the created pod", mp, ok)
	}

	// In step: another Sync only lists.
	if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Stats{Lists: 2, Gets: 1, Creates: 1}, m.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// TestSyncReplaces covers the mirror pods Sync creates again: deleted by a
// user (gracefully: still there with a deletion timestamp, or gone) and
// stale (another hash).
func TestSyncReplaces(t *testing.T) {
	s := static("etcd-node-a", "h1")
	tests := []struct {
		name string
		// change is done to the API server after the first Sync.
		change     func(t *testing.T, f *statustest.FakeAPI)
		wantDelete bool
	}{{
		name: "deleted by a user, being deleted",
		change: func(t *testing.T, f *statustest.FakeAPI) {
			if err := f.CoreV1().Pods("kube-system").Delete(t.Context(), s.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if f.Pod("kube-system", s.Name).DeletionTimestamp == nil {
				t.Fatal("the fake deleted the mirror pod at once; want a graceful deletion")
			}
		},
		wantDelete: true,
	}, {
		name: "deleted by a user, gone",
		change: func(t *testing.T, f *statustest.FakeAPI) {
			if err := f.CoreV1().Pods("kube-system").Delete(t.Context(), s.Name, *metav1.NewDeleteOptions(0)); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "stale",
		change: func(t *testing.T, f *statustest.FakeAPI) {
			body := `{"metadata":{"annotations":{"kubernetes.io/config.mirror":"h0"}}}`
			if _, err := f.CoreV1().Pods("kube-system").Patch(t.Context(), s.Name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		wantDelete: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachReadMode(t, func(t *testing.T, cached bool) {
				f := statustest.NewFakeAPI(node(testNode))
				m := newModeManager(t, f, Options{}, cached)
				// The second Sync finds the mirror pod the first created.
				for range 2 {
					if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
						t.Fatal(err)
					}
				}
				first := f.Pod("kube-system", s.Name)
				tt.change(t, f)
				before := len(f.PodActions("delete"))
				if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
					t.Fatal(err)
				}

				got := f.Pod("kube-system", s.Name)
				if got == nil || got.UID == first.UID || got.DeletionTimestamp != nil || got.Annotations[sources.AnnotationMirror] != "h1" {
					t.Fatalf("mirror pod after Sync = %+v; want a new one with hash h1", got)
				}
				dels := f.PodActions("delete")[before:]
				if got := len(dels) == 1; got != tt.wantDelete {
					t.Fatalf("%d DELETEs by Sync, want deleted %v", len(dels), tt.wantDelete)
				}
				if tt.wantDelete {
					opts := dels[0].(k8stesting.DeleteAction).GetDeleteOptions()
					if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != first.UID {
						t.Errorf("DELETE options %+v, want grace period 0 and the old mirror's UID %s", opts, first.UID)
					}
				}
				if mp, ok := m.MirrorPod(s); !ok || mp.UID != got.UID {
					t.Errorf("MirrorPod() = %v, %v; want the new mirror pod", mp, ok)
				}
			})
		})
	}
}

func TestSyncRemovesOrphans(t *testing.T) {
	eachReadMode(t, func(t *testing.T, cached bool) {
		kept, gone := static("kept-node-a", "h1"), static("gone-node-a", "h2")
		otherNodes := mirrorPod(static("other-node-b", "h3"), "h3")
		otherNodes.Spec.NodeName = "node-b"
		f := statustest.NewFakeAPI(node(testNode),
			mirrorPod(kept, "h1"), mirrorPod(gone, "h2"), otherNodes,
			apiPod("default", "web", testNode))
		m := newModeManager(t, f, Options{}, cached)
		if err := m.Sync(t.Context(), []*v1.Pod{kept}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			ns, name string
			want     bool
		}{
			{"kube-system", "kept-node-a", true},
			{"kube-system", "gone-node-a", false},
			{"kube-system", "other-node-b", true},
			{"default", "web", true},
		} {
			if got := f.Pod(c.ns, c.name) != nil; got != c.want {
				t.Errorf("pod %s/%s present = %v, want %v", c.ns, c.name, got, c.want)
			}
		}
		if s := m.Stats(); s.Creates != 0 || s.Deletes != 1 {
			t.Errorf("stats %+v, want no create and one delete", s)
		}
	})
}

func TestSyncLeavesAPodThatIsNotAMirror(t *testing.T) {
	eachReadMode(t, func(t *testing.T, cached bool) {
		s := static("web", "h1")
		s.Namespace = "default"
		f := statustest.NewFakeAPI(node(testNode), apiPod("default", "web", testNode))
		m := newModeManager(t, f, Options{}, cached)
		for range 2 {
			if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.Pod("default", "web"); got == nil || podmodel.IsMirror(got) {
			t.Errorf("pod default/web = %+v, want the regular pod untouched", got)
		}
		if st := m.Stats(); st.Writes() != 0 {
			t.Errorf("stats %+v, want no writes", st)
		}
		if _, ok := m.MirrorPod(s); ok {
			t.Error("MirrorPod() found a mirror, want none")
		}
	})
}

func TestSyncSkipsTheListWhenIdle(t *testing.T) {
	f := statustest.NewFakeAPI(node(testNode))
	m := newManager(t, f, Options{})
	for range 3 {
		if err := m.Sync(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Stats().Lists; n != 1 {
		t.Errorf("%d lists for an idle node, want 1 (the first)", n)
	}
}

func TestSyncNode(t *testing.T) {
	deleting := node(testNode)
	now := metav1.NewTime(time.Now())
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{"example.com/keep"}
	tests := []struct {
		name        string
		objs        []runtime.Object
		hook        func() (*v1.Node, bool)
		wantCreated bool
		wantGets    uint64
		wantUID     types.UID
	}{
		{name: "read from the API server", objs: []runtime.Object{node(testNode)}, wantCreated: true, wantGets: 1, wantUID: "node-uid-" + testNode},
		{name: "not registered", wantGets: 1},
		{name: "being deleted", objs: []runtime.Object{deleting}, wantGets: 1},
		{name: "from the hook", hook: func() (*v1.Node, bool) { return node("hooked"), true }, wantCreated: true, wantUID: "node-uid-hooked"},
		{name: "hook: not registered", hook: func() (*v1.Node, bool) { return nil, false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := statustest.NewFakeAPI(tt.objs...)
			m := newManager(t, f, Options{Node: tt.hook})
			s := static("etcd-node-a", "h1")
			if err := m.Sync(t.Context(), []*v1.Pod{s}); err != nil {
				t.Fatalf("Sync() = %v, want nil", err)
			}
			got := f.Pod("kube-system", s.Name)
			if (got != nil) != tt.wantCreated {
				t.Fatalf("mirror pod created = %v, want %v", got != nil, tt.wantCreated)
			}
			if got != nil && got.OwnerReferences[0].UID != tt.wantUID {
				t.Errorf("owner UID %s, want %s", got.OwnerReferences[0].UID, tt.wantUID)
			}
			if g := m.Stats().Gets; g != tt.wantGets {
				t.Errorf("%d GETs, want %d", g, tt.wantGets)
			}
		})
	}
}

func TestPodKinds(t *testing.T) {
	s := static("etcd-node-a", "h1")
	api := apiPod("default", "web", testNode)
	api.Annotations = map[string]string{sources.AnnotationSource: sources.APIServerSource}
	tests := []struct {
		name                 string
		pod                  *v1.Pod
		static, mirror, ofS1 bool
	}{
		{name: "static", pod: s, static: true},
		{name: "API pod", pod: api},
		{name: "API pod without source", pod: apiPod("default", "web", testNode)},
		{name: "mirror of s", pod: mirrorPod(s, "h1"), static: true, mirror: true, ofS1: true},
		{name: "stale mirror", pod: mirrorPod(s, "h0"), static: true, mirror: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []bool{podmodel.IsStatic(tt.pod), podmodel.IsMirror(tt.pod), podmodel.IsMirrorOf(tt.pod, s)}
			if diff := cmp.Diff([]bool{tt.static, tt.mirror, tt.ofS1}, got); diff != "" {
				t.Errorf("IsStatic, IsMirror, IsMirrorOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewChecksOptions(t *testing.T) {
	f := statustest.NewFakeAPI()
	if _, err := New(nil, Options{NodeName: testNode}); err == nil {
		t.Error("New(nil client) = nil error, want one")
	}
	if _, err := New(clientset.From(f), Options{}); err == nil {
		t.Error("New without NodeName = nil error, want one")
	}
	if _, err := New(clientset.From(f), Options{NodeName: testNode, RequestTimeout: -time.Second}); err == nil {
		t.Error("New with a negative RequestTimeout = nil error, want one")
	}
}
