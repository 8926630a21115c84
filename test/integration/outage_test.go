package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// outage is how long TestAPIServerOutage keeps its API server down.
const outage = 30 * time.Second

// The API server stopped for 30 s and started again (same etcd data, port
// and credentials): the source and the node controller keep running, keep
// the pods they had (no REMOVE), and resume: a new pod is delivered, the
// Lease is renewed and the status reported again.
func TestAPIServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the outage takes over 30 s")
	}
	srv := startAPIServer(t)
	c := newClient(t, srv.kubeconfig())
	nodeName := uniqueName("it-outage")
	ctl := newNodeController(t, srv.kubeconfig(), nodeName, node.Options{
		StatusUpdateFrequency: time.Second,
		StatusReportFrequency: 2 * time.Second,
		LeaseDuration:         4 * time.Second,
	})
	stopNode := runInBackground(t, "node controller", ctl.Run)
	before := createPod(t, c, newPod(uniqueName("before"), nodeName))
	// With client-go's 30 s cap the source lists again up to a minute after
	// the API server is back; 2 s keeps the test short.
	_, rec := runSource(t, srv.kubeconfig(), nodeName, apiserver.Options{MaxRetryInterval: 2 * time.Second})

	eventually(t, 10*time.Second, "node Ready", func() error { return nodeReady(t.Context(), c, nodeName) })
	rec.waitFor(t, sources.Add, before.Name)
	lastRenew := waitLease(t, c, nodeName).Spec.RenewTime.Time

	srv.stop()
	t.Logf("API server down for %v", outage)
	time.Sleep(outage)
	srv.restart()
	up := time.Now()

	after := createPod(t, c, newPod(uniqueName("after"), nodeName))
	rec.waitWithin(t, 20*time.Second, sources.Add, after.Name)
	t.Logf("new pod delivered %v after the API server came back", time.Since(up).Round(100*time.Millisecond))
	eventually(t, 30*time.Second, "lease renewed", func() error {
		l, err := getLease(t.Context(), c, nodeName)
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.Time.After(lastRenew.Add(outage)) {
			return fmt.Errorf("renew time %v, last before the outage %v", l.Spec.RenewTime, lastRenew)
		}
		return nil
	})
	eventually(t, 30*time.Second, "node status reported", func() error {
		n, err := getNode(t.Context(), c, nodeName)
		if err != nil {
			return err
		}
		r := readyCondition(n)
		if r == nil || !r.LastHeartbeatTime.Time.After(up.Add(-time.Second)) {
			return fmt.Errorf("Ready condition %+v: no heartbeat since the API server came back", r)
		}
		return nodeReady(t.Context(), c, nodeName)
	})
	if p, ok := rec.find(sources.Remove, before.Name); ok {
		t.Errorf("pod %s was REMOVEd across the outage", p.Name)
	}
	if _, ok := ctl.Node(); !ok {
		t.Error(errors.New("the node controller lost its Node"))
	}
	stopNode()
}
