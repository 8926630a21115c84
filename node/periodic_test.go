package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/periodic"
)

// Controllers sharing a periodic.Driver (Options.Periodic) register their
// Nodes, come Ready as soon as their health passes (the fast updates after
// start-up), pass over their status every 10s and renew their Leases
// every 10s (plus jitter), as without one; between passes each holds one
// goroutine (its Run) instead of three.
func TestControllersShareADriver(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", shared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 4
				c := newClient()
				var d *periodic.Driver
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, n+1)
				if shared {
					d = periodic.NewDriver()
					go func() { done <- d.Run(ctx) }()
				}
				var healthy atomic.Bool
				for i := range n {
					startNode(t, ctx, c, fmt.Sprintf("n%d", i), d, &healthy, done)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				healthy.Store(true)
				time.Sleep(200 * time.Millisecond)
				synctest.Wait()
				nodes, err := c.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
				if err != nil || len(nodes.Items) != n {
					t.Fatalf("%v nodes registered (%v), want %d", len(nodes.Items), err, n)
				}
				for i := range nodes.Items {
					if s, msg := ready(&nodes.Items[i]); s != v1.ConditionTrue {
						t.Errorf("node %s: Ready = %s %q 200ms after its health passed, want True", nodes.Items[i].Name, s, msg)
					}
				}

				time.Sleep(5 * time.Second)
				synctest.Wait()
				want := 3 * n
				if shared {
					want = n
				}
				per := nodeGoroutines()
				gets, renewals := count(c, "get", "nodes", ""), count(c, "update", "leases", "")
				time.Sleep(time.Minute)
				synctest.Wait()
				gets, renewals = count(c, "get", "nodes", "")-gets, count(c, "update", "leases", "")-renewals
				if gets != 6*n {
					t.Errorf("%d status passes (GETs of the Node) in a minute, want %d", gets, 6*n)
				}
				if renewals < 5*n || renewals > 6*n {
					t.Errorf("%d Lease renewals in a minute, want %d to %d", renewals, 5*n, 6*n)
				}
				if per != want {
					t.Errorf("%d goroutines for %d idle controllers, want %d", per, n, want)
				}
				cancel()
				for range n {
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
				}
				if shared {
					<-done
				}
			})
		})
	}
}

// nodeGoroutines counts the goroutines running the controllers' code
// (a frame of package node in their stacks), whatever else the process
// runs.
func nodeGoroutines() int { return leakcheck.Goroutines("github.com/nodekit/nodekit/node.") }

// A Node is Ready on the status pass that follows its health passing,
// even when the health passes while the first pass runs (between its
// reading the health and its end, here as it reads the Node): that pass
// wrote NotReady, and it must not count as the fast updates' Ready one,
// which left the Node NotReady for a whole status interval (10s).
func TestReadyWhenHealthPassesDuringFirstPass(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", shared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClient()
				var healthy atomic.Bool
				c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, kruntime.Object, error) {
					healthy.Store(true)
					return false, nil, nil
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 2)
				var d *periodic.Driver
				if shared {
					d = periodic.NewDriver()
					go func() { done <- d.Run(ctx) }()
				}
				startNode(t, ctx, c, "n0", d, &healthy, done)
				time.Sleep(time.Second)
				synctest.Wait()
				n, err := c.CoreV1().Nodes().Get(t.Context(), "n0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if s, msg := ready(n); s != v1.ConditionTrue {
					t.Errorf("Ready = %s %q 1s after the health passed, want True", s, msg)
				}
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
				if shared {
					if err := <-done; err != nil {
						t.Error(err)
					}
				}
			})
		})
	}
}

// startNode runs the Node controller of name on c, on the Driver d (nil:
// its own timers), healthy once healthy is set; Run's error goes to done.
func startNode(t *testing.T, ctx context.Context, c *fake.Clientset, name string, d *periodic.Driver, healthy *atomic.Bool, done chan<- error) {
	t.Helper()
	ctl, err := node.New(clientset.From(c), name, node.Options{
		Machine: &machine, InternalIP: net.ParseIP("192.0.2.1"), AgentVersion: "nodekit/test",
		Logger: testr.New(t), Periodic: d,
		Health: func() error {
			if !healthy.Load() {
				return errors.New("starting")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- ctl.Run(ctx) }()
}
