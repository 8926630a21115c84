package node_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/node"
)

// trackerNodes reads the Nodes straight from the fake's tracker, as a
// cache a watch keeps current would hold them, without a request.
type trackerNodes struct{ c *fake.Clientset }

func (g trackerNodes) Get(name string) (*v1.Node, error) {
	o, err := g.c.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", name)
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
}

// With Options.Nodes, the status passes read the Node from it rather than
// with a GET every StatusUpdateFrequency, and write the same: a PATCH
// when the status changes. A Node deleted is registered again.
func TestStatusFromSharedNodes(t *testing.T) {
	for _, shared := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c := newClient()
			var opts node.Options
			if shared {
				opts.Nodes = trackerNodes{c}
			}
			var down atomic.Pointer[error]
			opts.Health = func() error {
				if e := down.Load(); e != nil {
					return *e
				}
				return nil
			}
			stop := start(t, newController(t, c, opts))
			synctest.Wait()
			gets := count(c, "get", "nodes", "")
			time.Sleep(time.Minute)
			synctest.Wait()
			perMinute := count(c, "get", "nodes", "") - gets
			switch {
			case shared && perMinute != 0:
				t.Errorf("shared: %d GETs of the Node in a minute, want 0", perMinute)
			case !shared && perMinute != 6:
				t.Errorf("own: %d GETs of the Node in a minute, want 6", perMinute)
			}
			e := errors.New("runtime: not responding")
			down.Store(&e)
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if got := count(c, "patch", "nodes", "status"); got != 1 {
				t.Errorf("shared %v: %d status patches after the health changed, want 1", shared, got)
			}
			if s, msg := ready(getNode(t, c)); s != v1.ConditionFalse || msg != "runtime: not responding" {
				t.Errorf("shared %v: Ready = %s %q, want False with the health error", shared, s, msg)
			}
			old := getNode(t, c)
			if err := c.CoreV1().Nodes().Delete(t.Context(), nodeName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if n := getNode(t, c); n.UID == old.UID {
				t.Errorf("shared %v: node not registered again after its deletion", shared)
			}
			stop()
		})
	}
}
