package apiserver_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/sources/sourcestest"
)

const node = "node-1"

func pod(ns, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// names lists a snapshot's pods as namespace/name.
func names(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// start runs src in the background and returns its snapshots and a func
// that stops it and returns Run's error.
func start(t *testing.T, src *apiserver.Source) (<-chan []*v1.Pod, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	snaps := make(chan []*v1.Pod, 100)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, snaps) }()
	return snaps, func() error { cancel(); return <-done }
}

// startMode starts a source of node's pods on client that watches them
// itself (mode "own") or reads them from a SharedPods it starts too
// ("shared"); stop ends both.
func startMode(t *testing.T, client *fake.Clientset, mode string) (src *apiserver.Source, snaps <-chan []*v1.Pod, stop func()) {
	t.Helper()
	opts := apiserver.Options{Logger: testr.New(t)}
	stopShared := func() {}
	if mode == "shared" {
		shared, err := apiserver.NewSharedPods(clientset.From(client), opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- shared.Run(ctx) }()
		stopShared = func() { cancel(); <-done }
		opts.Shared = shared
	}
	src, err := apiserver.New(clientset.From(client), node, opts)
	if err != nil {
		stopShared()
		t.Fatal(err)
	}
	snaps, stopSrc := start(t, src)
	return src, snaps, func() {
		stopSrc()
		stopShared()
	}
}

func newSource(t *testing.T, client *fake.Clientset) *apiserver.Source {
	t.Helper()
	src, err := apiserver.New(clientset.From(client), node, apiserver.Options{Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// last drains the snapshots sent so far (after the bubble settled) and
// returns how many there were and the last one.
func last(snaps <-chan []*v1.Pod) (int, []*v1.Pod) {
	n := 0
	var l []*v1.Pod
	for {
		select {
		case s := <-snaps:
			n++
			l = s
		default:
			return n, l
		}
	}
}

func TestNewValidates(t *testing.T) {
	client := fake.NewClientset()
	tests := []struct {
		name   string
		client bool
		node   string
		opts   apiserver.Options
		ok     bool
	}{
		{"valid", true, node, apiserver.Options{}, true},
		{"no client", false, node, apiserver.Options{}, false},
		{"no node name", true, "", apiserver.Options{}, false},
		{"negative interval", true, node, apiserver.Options{MinInterval: -time.Second}, false},
		{"negative retry interval", true, node, apiserver.Options{MaxRetryInterval: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.client {
				_, err = apiserver.New(clientset.From(client), tt.node, tt.opts)
			} else {
				_, err = apiserver.New(nil, tt.node, tt.opts)
			}
			if (err == nil) != tt.ok {
				t.Errorf("New() error = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(pod("b", "two"), pod("a", "one"))
		snaps, stop := start(t, newSource(t, client))
		ctx := t.Context()

		synctest.Wait()
		n, got := last(snaps)
		if n != 1 {
			t.Errorf("%d snapshots after the first list, want 1", n)
		}
		if diff := cmp.Diff([]string{"a/one", "b/two"}, names(got)); diff != "" {
			t.Errorf("first snapshot (-want +got):\n%s", diff)
		}

		steps := []struct {
			name   string
			change func() error
			want   []string
		}{
			{"add", func() error {
				_, err := client.CoreV1().Pods("a").Create(ctx, pod("a", "three"), metav1.CreateOptions{})
				return err
			}, []string{"a/one", "a/three", "b/two"}},
			{"update", func() error {
				p := pod("a", "one")
				p.Labels = map[string]string{"x": "y"}
				_, err := client.CoreV1().Pods("a").Update(ctx, p, metav1.UpdateOptions{})
				return err
			}, []string{"a/one", "a/three", "b/two"}},
			{"delete", func() error {
				return client.CoreV1().Pods("b").Delete(ctx, "two", metav1.DeleteOptions{})
			}, []string{"a/one", "a/three"}},
		}
		for _, st := range steps {
			if err := st.change(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			n, got := last(snaps)
			if n != 1 {
				t.Errorf("%s: %d snapshots, want 1", st.name, n)
			}
			if diff := cmp.Diff(st.want, names(got)); diff != "" {
				t.Errorf("%s: snapshot (-want +got):\n%s", st.name, diff)
			}
			if st.name == "update" && got[0].Labels["x"] != "y" {
				t.Errorf("update: labels %v, want the update's", got[0].Labels)
			}
		}
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestEmptyListIsASnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		snaps, stop := start(t, newSource(t, fake.NewClientset()))
		synctest.Wait()
		n, got := last(snaps)
		if n != 1 || len(got) != 0 {
			t.Errorf("got %d snapshots, last %v; want one empty snapshot", n, names(got))
		}
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestBurstsAreCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		snaps, stop := start(t, newSource(t, client))
		synctest.Wait()
		if n, _ := last(snaps); n != 1 {
			t.Fatalf("%d first snapshots, want 1", n)
		}
		// 20 pods, one every 10 ms: 200 ms of changes.
		for i := range 20 {
			p := pod("ns", string(rune('a'+i)))
			if _, err := client.CoreV1().Pods("ns").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		n, got := last(snaps)
		// At most one snapshot per 100 ms over 200 ms, plus the trailing one.
		if n < 1 || n > 3 {
			t.Errorf("%d snapshots for a burst of 20 changes over 200ms, want 1 to 3", n)
		}
		if len(got) != 20 {
			t.Errorf("last snapshot has %d pods, want 20", len(got))
		}
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestListsWithNodeSelector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		_, stop := start(t, newSource(t, client))
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		want := fields.OneTermEqualSelector("spec.nodeName", node).String()
		var got []string
		for _, a := range client.Actions() {
			switch a := a.(type) {
			case k8stesting.ListAction:
				got = append(got, "list "+a.GetListRestrictions().Fields.String())
			case k8stesting.WatchAction:
				got = append(got, "watch "+a.GetWatchRestrictions().Fields.String())
			}
		}
		if diff := cmp.Diff([]string{"list " + want, "watch " + want}, got); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

// An expired watch ("too old resource version", 410) makes the reflector
// list again: a pod created while the watch missed it shows up.
func TestRelistsAfterExpiredWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(pod("a", "one"))
		first := watch.NewRaceFreeFake()
		watches := 0
		client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
			watches++
			if watches == 1 {
				return true, first, nil // a watch that sees nothing
			}
			return false, nil, nil
		})
		snaps, stop := start(t, newSource(t, client))
		synctest.Wait()
		if _, got := last(snaps); len(got) != 1 {
			t.Fatalf("first snapshot %v, want a/one", names(got))
		}
		if _, err := client.CoreV1().Pods("a").Create(t.Context(), pod("a", "two"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n, _ := last(snaps); n != 0 {
			t.Fatalf("%d snapshots while the watch saw nothing, want 0", n)
		}
		gone := apierrors.NewResourceExpired("too old resource version: 1 (2)")
		first.Error(&gone.ErrStatus)
		time.Sleep(time.Minute) // past the reflector's back-off
		synctest.Wait()
		_, got := last(snaps)
		if diff := cmp.Diff([]string{"a/one", "a/two"}, names(got)); diff != "" {
			t.Errorf("snapshot after the relist (-want +got):\n%s", diff)
		}
		if watches < 2 {
			t.Errorf("%d watches, want a second one after the expiry", watches)
		}
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestConformance(t *testing.T) {
	sourcestest.SourceSuite(t, func(t *testing.T) sources.Source {
		return newSource(t, fake.NewClientset(pod("a", "one")))
	})
}
