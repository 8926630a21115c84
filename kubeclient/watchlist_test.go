package kubeclient_test

import (
	"context"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/kubeclient/clientset"
)

// smallFake is a test's own client: its pods' Watch knows nothing of
// streaming lists (no bookmark ends the initial events).
type smallFake struct{ kubeclient.Interface }

func (smallFake) CoreV1() kubeclient.CoreV1Interface { return smallCore{} }

type smallCore struct{ kubeclient.CoreV1Interface }

func (smallCore) Pods(string) kubeclient.PodInterface { return smallPods{} }

type smallPods struct{ kubeclient.PodInterface }

func (smallPods) List(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
	return &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "1"},
		Items:    []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ResourceVersion: "1"}}},
	}, nil
}

func (smallPods) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func podListWatch(c kubeclient.Interface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Pods("").List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Pods("").Watch(ctx, opts)
		},
	}
}

// An informer over a client of the test's own lists and then watches, and
// syncs: streaming lists are used only by clients that serve them.
func TestListWatcherSmallFakeSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := smallFake{}
		inf := cache.NewSharedIndexInformer(kubeclient.ListWatcher(podListWatch(c), c), &corev1.Pod{}, 0, cache.Indexers{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go inf.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("the informer did not sync")
		}
		if keys := inf.GetStore().ListKeys(); len(keys) != 1 || keys[0] != "ns/a" {
			t.Errorf("store keys = %q, want [ns/a]", keys)
		}
		cancel()
		synctest.Wait()
	})
}

func TestListWatcherSemantics(t *testing.T) {
	cs, err := kubeclient.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		client      kubeclient.Interface
		unsupported bool
	}{
		{"Clientset", cs, false},
		{"client-go fake through clientset.From", clientset.From(fake.NewClientset()), true},
		{"a test's own client", smallFake{}, true},
	} {
		lw := kubeclient.ListWatcher(podListWatch(tc.client), tc.client)
		if got := watchlist.DoesClientNotSupportWatchListSemantics(lw); got != tc.unsupported {
			t.Errorf("%s: streaming lists unsupported = %v, want %v", tc.name, got, tc.unsupported)
		}
	}
}
