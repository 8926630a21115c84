package clientset_test

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/watchlist"

	"github.com/nodekit/nodekit/kubeclient/clientset"
)

// TestFrom reads through the adapter what a fake clientset holds, and
// writes through it what the fake then holds.
func TestFrom(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Handler: "h"},
	)
	c := clientset.From(cs)
	ctx := t.Context()
	if p, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil || p.Name != "p" {
		t.Errorf("pod get: %v, %v", p, err)
	}
	if l, err := c.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Handler != "h" {
		t.Errorf("runtime class list: %v, %v", l, err)
	}
	if _, err := c.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{}); err != nil {
		t.Errorf("the lease created through the adapter: %v", err)
	}
	if !watchlist.DoesClientNotSupportWatchListSemantics(c) {
		t.Error("the adapter of a fake clientset claims the watch-list semantics the fake lacks")
	}
	u, ok := c.(interface{ Unwrap() kubernetes.Interface })
	if !ok || u.Unwrap() != kubernetes.Interface(cs) {
		t.Error("Unwrap does not return the clientset")
	}
}
