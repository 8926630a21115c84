package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/version"
)

const nodeName = "n1"

var machine = node.Machine{
	CPUs: 2, MemoryBytes: 4 << 30, MachineID: "mid", BootID: "boot", KernelVersion: "6.1.0",
	OSImage: "Debian", OperatingSystem: "linux", Architecture: "amd64",
}

// newClient is a fake clientset that gives created objects a UID, as the
// API server does.
func newClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	var n atomic.Int64
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && o.GetUID() == "" {
			o.SetUID(types.UID(fmt.Sprintf("uid-%d", n.Add(1))))
		}
		return false, nil, nil
	})
	return c
}

func newController(t *testing.T, c *fake.Clientset, opts node.Options) *node.Controller {
	t.Helper()
	opts.Machine = &machine
	opts.InternalIP = net.ParseIP("192.0.2.1")
	opts.AgentVersion = "nodekit/test"
	opts.Logger = testr.New(t)
	ctl, err := node.New(clientset.From(c), nodeName, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

func start(t *testing.T, ctl *node.Controller) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	}
}

func getNode(t *testing.T, c *fake.Clientset) *v1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func getLease(t *testing.T, c *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases(node.LeaseNamespace).Get(t.Context(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// count counts the actions of verb on resource (and subresource).
func count(c *fake.Clientset, verb, resource, subresource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

func ready(n *v1.Node) (v1.ConditionStatus, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status, c.Message
		}
	}
	return "", ""
}

func TestNewValidates(t *testing.T) {
	c := fake.NewClientset()
	tests := []struct {
		name string
		node string
		opts node.Options
		ok   bool
	}{
		{"valid", "n", node.Options{}, true},
		{"no name", "", node.Options{}, false},
		{"negative max pods", "n", node.Options{MaxPods: -1}, false},
		{"negative frequency", "n", node.Options{StatusUpdateFrequency: -time.Second}, false},
		{"short lease", "n", node.Options{LeaseDuration: time.Millisecond}, false},
		{"bad ip", "n", node.Options{InternalIP: net.IP{1, 2}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := node.New(clientset.From(c), tt.node, tt.opts); (err == nil) != tt.ok {
				t.Errorf("New() error = %v, want ok %v", err, tt.ok)
			}
		})
	}
	if _, err := node.New(nil, "n", node.Options{}); err == nil {
		t.Error("New(nil client) succeeded")
	}
}

func TestRegisters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		ctl := newController(t, c, node.Options{Labels: map[string]string{"role": "edge"}, MaxPods: 20})
		stop := start(t, ctl)
		synctest.Wait()

		n := getNode(t, c)
		wantLabels := map[string]string{
			"role": "edge", node.LabelHostname: nodeName, node.LabelOS: "linux", node.LabelArch: "amd64",
		}
		if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		got := map[string]string{}
		for name, q := range n.Status.Capacity {
			got["capacity/"+string(name)] = q.String()
		}
		for name, q := range n.Status.Allocatable {
			got["allocatable/"+string(name)] = q.String()
		}
		want := map[string]string{
			"capacity/cpu": "2", "capacity/memory": "4Gi", "capacity/pods": "20",
			"allocatable/cpu": "2", "allocatable/memory": "4Gi", "allocatable/pods": "20",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("resources (-want +got):\n%s", diff)
		}
		wantInfo := v1.NodeSystemInfo{
			MachineID: "mid", BootID: "boot", KernelVersion: "6.1.0", OSImage: "Debian",
			KubeletVersion: "nodekit/test", OperatingSystem: "linux", Architecture: "amd64",
		}
		if diff := cmp.Diff(wantInfo, n.Status.NodeInfo); diff != "" {
			t.Errorf("nodeInfo (-want +got):\n%s", diff)
		}
		wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.1"}, {Type: v1.NodeHostName, Address: nodeName}}
		if diff := cmp.Diff(wantAddrs, n.Status.Addresses); diff != "" {
			t.Errorf("addresses (-want +got):\n%s", diff)
		}
		if s, _ := ready(n); s != v1.ConditionTrue {
			t.Errorf("Ready = %q, want True", s)
		}
		got2, ok := ctl.Node()
		if !ok || got2.UID != n.UID {
			t.Errorf("Node() = %v, %v; want the registered node %s", got2, ok, n.UID)
		}
		addrs := ctl.Addresses()
		if diff := cmp.Diff(wantAddrs, addrs); diff != "" {
			t.Errorf("Addresses() (-want +got):\n%s", diff)
		}
		addrs[0].Address = "changed"
		if got := ctl.Addresses(); got[0].Address != "192.0.2.1" {
			t.Errorf("Addresses() after its answer was changed = %v: want a copy", got)
		}
		// The Node's InternalIP addresses, not the fallback.
		if got := node.HostIPs(ctl, net.ParseIP("10.0.0.1")); !slices.Equal(got, []string{"192.0.2.1"}) {
			t.Errorf("HostIPs = %v, want the Node's internal address 192.0.2.1", got)
		}
		stop()
	})
}

// Without a cluster (no Controller) a node's host IPs are the fallback
// address, or none.
func TestHostIPsWithoutCluster(t *testing.T) {
	if got := node.HostIPs(nil, net.ParseIP("10.0.0.1")); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("HostIPs(nil, 10.0.0.1) = %v, want [10.0.0.1]", got)
	}
	if got := node.HostIPs(nil, nil); got != nil {
		t.Errorf("HostIPs(nil, nil) = %v, want none", got)
	}
}

// TestRegistersVersion: by default the Node's kubeletVersion is the
// Kubernetes version nodekit follows with nodekit's version as build
// metadata, a semantic version that compares equal to the Kubernetes
// version, and the annotation holds nodekit's version.
func TestRegistersVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		ctl, err := node.New(clientset.From(c), nodeName, node.Options{Machine: &machine, Logger: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, ctl)
		synctest.Wait()
		n := getNode(t, c)
		stop()

		info := version.Get()
		got := n.Status.NodeInfo.KubeletVersion
		if want := info.KubeletVersion(); got != want {
			t.Errorf("kubeletVersion = %q, want %q", got, want)
		}
		if !strings.HasPrefix(got, info.Kubernetes+"+nodekit.") {
			t.Errorf("kubeletVersion = %q, want %s+nodekit.<nodekit's version>", got, info.Kubernetes)
		}
		v, err := kversion.ParseSemantic(got)
		if err != nil {
			t.Fatalf("kubeletVersion %q: %v", got, err)
		}
		if c, err := v.Compare(info.Kubernetes); err != nil || c != 0 {
			t.Errorf("kubeletVersion %q compares %d (%v) with %s, want equal", got, c, err, info.Kubernetes)
		}
		if a := n.Annotations[node.AnnotationVersion]; a != info.Module() || a == "" {
			t.Errorf("annotation %s = %q, want %q", node.AnnotationVersion, a, info.Module())
		}
	})
}

func TestAdoptsExistingNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: nodeName, UID: "old-uid",
			Labels: map[string]string{"keep": "me", "role": "wrong"},
		}}
		c := newClient(existing)
		stop := start(t, newController(t, c, node.Options{Labels: map[string]string{"role": "edge"}}))
		synctest.Wait()
		n := getNode(t, c)
		if n.UID != "old-uid" {
			t.Errorf("UID %q, want the existing node's", n.UID)
		}
		wantLabels := map[string]string{
			"keep": "me", "role": "edge", node.LabelHostname: nodeName, node.LabelOS: "linux", node.LabelArch: "amd64",
		}
		if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		// An adopted node gets its status at once.
		if s, _ := ready(n); s != v1.ConditionTrue {
			t.Errorf("Ready = %q, want True", s)
		}
		stop()
	})
}

func TestRegistrationRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		failures := 4
		c.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failures > 0 {
				failures--
				return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
			}
			return false, nil, nil
		})
		begin := time.Now()
		stop := start(t, newController(t, c, node.Options{}))
		synctest.Wait()
		if got := count(c, "create", "nodes", ""); got != 1 {
			t.Fatalf("%d creates reached the tracker before the back-off, want 1", got)
		}
		for {
			if _, err := c.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", nodeName); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// 0.1 + 0.2 + 0.4 + 0.8 s of back-off.
		if d := time.Since(begin); d < 1500*time.Millisecond || d > 1600*time.Millisecond {
			t.Errorf("registered after %v, want 1.5s of back-off", d)
		}
		if got := count(c, "create", "nodes", ""); got != 5 {
			t.Errorf("%d creates, want 5", got)
		}
		stop()
	})
}

// The status is PATCHed when it changes, and otherwise only every
// StatusReportFrequency; never with a PUT.
func TestStatusUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		var health atomic.Pointer[error]
		nilErr := error(nil)
		health.Store(&nilErr)
		stop := start(t, newController(t, c, node.Options{
			Health: func() error { return *health.Load() },
		}))
		synctest.Wait()
		patches := func() int { return count(c, "patch", "nodes", "status") }
		if got := patches(); got != 0 {
			t.Errorf("%d status patches right after creating the node, want 0", got)
		}

		time.Sleep(4*time.Minute + 55*time.Second)
		synctest.Wait()
		if got := patches(); got != 0 {
			t.Errorf("%d status patches before the report frequency, want 0", got)
		}
		time.Sleep(10 * time.Second) // the tick at 5m
		synctest.Wait()
		if got := patches(); got != 1 {
			t.Errorf("%d status patches after 5m, want 1", got)
		}

		down := error(errors.New("runtime: not responding"))
		health.Store(&down)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := patches(); got != 2 {
			t.Errorf("%d status patches after the health changed, want 2", got)
		}
		if s, msg := ready(getNode(t, c)); s != v1.ConditionFalse || msg != "runtime: not responding" {
			t.Errorf("Ready = %s %q, want False with the health error", s, msg)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := patches(); got != 2 {
			t.Errorf("%d status patches a minute later, want still 2", got)
		}
		if got := count(c, "update", "nodes", "status") + count(c, "update", "nodes", ""); got != 0 {
			t.Errorf("%d node updates (PUT), want 0", got)
		}
		stop()
	})
}

func TestLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		stop := start(t, newController(t, c, node.Options{}))
		synctest.Wait()
		n := getNode(t, c)
		l := getLease(t, c)
		if got := *l.Spec.HolderIdentity; got != nodeName {
			t.Errorf("holder %q, want %q", got, nodeName)
		}
		if got := *l.Spec.LeaseDurationSeconds; got != 40 {
			t.Errorf("duration %d, want 40", got)
		}
		wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: n.UID}}
		if diff := cmp.Diff(wantOwner, l.OwnerReferences); diff != "" {
			t.Errorf("owner (-want +got):\n%s", diff)
		}
		first := l.Spec.RenewTime.Time
		time.Sleep(11 * time.Second) // 10s, with the controller's 4% jitter
		synctest.Wait()
		second := getLease(t, c).Spec.RenewTime.Time
		if d := second.Sub(first); d < 10*time.Second || d > 11*time.Second {
			t.Errorf("renewed after %v, want 10s", d)
		}
		stop()
		updates := count(c, "update", "leases", "")
		time.Sleep(time.Minute)
		if got := count(c, "update", "leases", ""); got != updates {
			t.Errorf("%d lease updates after Run returned", got-updates)
		}
	})
}

func TestReregistersDeletedNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		ctl := newController(t, c, node.Options{})
		stop := start(t, ctl)
		synctest.Wait()
		old := getNode(t, c)
		if err := c.CoreV1().Nodes().Delete(t.Context(), nodeName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		n := getNode(t, c)
		if n.UID == old.UID {
			t.Fatalf("node UID %q unchanged after the deletion", n.UID)
		}
		if s, _ := ready(n); s != v1.ConditionTrue {
			t.Errorf("Ready = %q, want True", s)
		}
		if got, _ := ctl.Node(); got == nil || got.UID != n.UID {
			t.Errorf("Node() = %v, want the new node", got)
		}
		time.Sleep(11 * time.Second) // a lease renewal
		synctest.Wait()
		refs := getLease(t, c).OwnerReferences
		if len(refs) != 1 || refs[0].UID != n.UID {
			t.Errorf("lease owners %v, want the new node %s", refs, n.UID)
		}
		stop()
	})
}

// The API server failing for a while stops nothing: the controller goes on
// and reports again once it answers.
func TestSurvivesAPIErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		var down atomic.Bool
		c.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
			if down.Load() {
				return true, nil, apierrors.NewServiceUnavailable("down")
			}
			return false, nil, nil
		})
		stop := start(t, newController(t, c, node.Options{}))
		synctest.Wait()
		down.Store(true)
		time.Sleep(time.Minute)
		synctest.Wait()
		renewed := getLeaseFromTracker(t, c).Spec.RenewTime.Time
		down.Store(false)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if l := getLeaseFromTracker(t, c); !l.Spec.RenewTime.Time.After(renewed) {
			t.Errorf("lease not renewed after the API server came back")
		}
		stop()
	})
}

func getLeaseFromTracker(t *testing.T, c *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	o, err := c.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), node.LeaseNamespace, nodeName)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*coordinationv1.Lease)
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, newClient(), node.Options{})
		stop := start(t, ctl)
		synctest.Wait()
		if err := ctl.Run(t.Context()); err == nil {
			t.Error("a second concurrent Run succeeded")
		}
		stop()
	})
}

func TestNoGoroutineLeft(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ctl := newController(t, newClient(), node.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v", err)
	}
	if err := leakcheck.Find(ignore); err != nil {
		t.Error(err)
	}
}

// TestReadySoonAfterStart: a Node registered while the agent is not healthy
// yet (no relist done) is reported Ready as soon as the health check
// passes, not at the next status tick.
func TestReadySoonAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		var healthy atomic.Bool
		stop := start(t, newController(t, c, node.Options{
			Health: func() error {
				if healthy.Load() {
					return nil
				}
				return errors.New("pleg: no relist has completed yet")
			},
		}))
		synctest.Wait()
		if s, _ := ready(getNode(t, c)); s != v1.ConditionFalse {
			t.Fatalf("Ready = %s at registration, want False", s)
		}
		time.Sleep(300 * time.Millisecond)
		healthy.Store(true)
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if s, msg := ready(getNode(t, c)); s != v1.ConditionTrue {
			t.Errorf("Ready = %s %q 200ms after the agent became healthy, want True", s, msg)
		}
		stop()
	})
}

// TestReadyOnFirstPassAfterSlowStart: a Node whose agent becomes healthy
// later than StatusUpdateFrequency after it registered is Ready within
// the fast update's 100ms, not at the next tick.
func TestReadyOnFirstPassAfterSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		var healthy atomic.Bool
		stop := start(t, newController(t, c, node.Options{
			Health: func() error {
				if healthy.Load() {
					return nil
				}
				return errors.New("pleg: no relist yet")
			},
		}))
		synctest.Wait()
		if s, _ := ready(getNode(t, c)); s != v1.ConditionFalse {
			t.Fatalf("Ready = %s at registration, want False", s)
		}
		time.Sleep(15 * time.Second)
		healthy.Store(true)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if s, _ := ready(getNode(t, c)); s != v1.ConditionTrue {
			t.Errorf("Ready = %s 150ms after the agent became healthy at 15s, want True", s)
		}
		stop()
	})
}

// TestReadyRetriedAfterFailedPatch: the first status write after the
// agent became healthy fails; it is retried within 100ms, not at the next
// tick.
func TestReadyRetriedAfterFailedPatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient()
		var healthy atomic.Bool
		var failed atomic.Int32
		c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "status" && failed.Add(1) == 1 {
				return true, nil, apierrors.NewServiceUnavailable("down")
			}
			return false, nil, nil
		})
		stop := start(t, newController(t, c, node.Options{
			Health: func() error {
				if healthy.Load() {
					return nil
				}
				return errors.New("pleg: no relist yet")
			},
		}))
		synctest.Wait()
		time.Sleep(time.Second)
		healthy.Store(true)
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		if s, _ := ready(getNode(t, c)); s != v1.ConditionTrue {
			t.Errorf("Ready = %s 250ms after the agent became healthy (first write failed), want True", s)
		}
		if got := failed.Load(); got < 2 {
			t.Errorf("%d status patches, want the failed one retried", got)
		}
		stop()
	})
}
