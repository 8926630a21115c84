package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	sysruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/version"
)

// newNodeController returns a node controller talking to the API server
// of kubeconfig through kubeclient, as an agent does.
func newNodeController(t *testing.T, kubeconfig, name string, opts node.Options) *node.Controller {
	t.Helper()
	opts.Logger = testr.New(t)
	ctl, err := node.New(newAgentClient(t, kubeconfig), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

// The Node is registered with the machine's capacity, allocatable
// resources, addresses and nodeInfo, and becomes Ready; its Lease has the
// kubelet's duration and the Node as owner.
func TestNodeRegistration(t *testing.T) {
	c := client(t)
	name := uniqueName("it-reg")
	cleanupNode(t, c, name)
	ctl := newNodeController(t, kubeconfig(t), name, node.Options{
		Labels:               map[string]string{"nodekit.example/test": "registration"},
		EphemeralStoragePath: t.TempDir(),
		RuntimeVersion:       func(context.Context) (string, error) { return "fake://1.0", nil },
	})
	runInBackground(t, "node controller", ctl.Run)

	eventually(t, 10*time.Second, "node Ready", func() error { return nodeReady(t.Context(), c, name) })
	n, err := getNode(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"nodekit.example/test":   "registration",
		"kubernetes.io/hostname": name, "kubernetes.io/os": sysruntime.GOOS, "kubernetes.io/arch": sysruntime.GOARCH,
	}
	if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got, want := n.Status.Capacity.Cpu().Value(), int64(sysruntime.NumCPU()); got != want {
		t.Errorf("cpu capacity %d, want %d", got, want)
	}
	if got := n.Status.Capacity.Pods().Value(); got != node.DefaultMaxPods {
		t.Errorf("pods capacity %d, want %d", got, node.DefaultMaxPods)
	}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage} {
		capQ, ok := n.Status.Capacity[r]
		if !ok || capQ.Sign() <= 0 {
			t.Errorf("capacity %s = %v, want > 0", r, capQ.String())
		}
		if a := n.Status.Allocatable[r]; a.Cmp(capQ) != 0 {
			t.Errorf("allocatable %s = %v, want the capacity %v (nothing reserved)", r, a.String(), capQ.String())
		}
	}
	info := n.Status.NodeInfo
	// The Kubernetes version nodekit follows, with nodekit's as build
	// metadata: a semantic version that compares as the Kubernetes one.
	vi := version.Get()
	if v := info.KubeletVersion; v != vi.KubeletVersion() || !strings.HasPrefix(v, vi.Kubernetes+"+nodekit.") {
		t.Errorf("kubelet version %q, want %q (the Kubernetes version nodekit follows, then nodekit's)", v, vi.KubeletVersion())
	} else if sv, err := kversion.ParseSemantic(v); err != nil || sv.String() != strings.TrimPrefix(v, "v") {
		t.Errorf("kubelet version %q is not a semantic version: %v", v, err)
	}
	if a := n.Annotations[node.AnnotationVersion]; a == "" || a != vi.Module() {
		t.Errorf("annotation %s = %q, want nodekit's version %q", node.AnnotationVersion, a, vi.Module())
	}
	if info.ContainerRuntimeVersion != "fake://1.0" || info.OperatingSystem != sysruntime.GOOS || info.Architecture != sysruntime.GOARCH ||
		info.KernelVersion == "" || info.OSImage == "" {
		t.Errorf("nodeInfo %+v: want runtime version, OS, architecture, kernel and OS image", info)
	}
	if _, err := os.Stat("/etc/machine-id"); err == nil && info.MachineID == "" {
		t.Errorf("no machineID, though /etc/machine-id exists")
	}
	var hostname bool
	for _, a := range n.Status.Addresses {
		hostname = hostname || (a.Type == v1.NodeHostName && a.Address == name)
	}
	if !hostname {
		t.Errorf("addresses %v: want Hostname %s", n.Status.Addresses, name)
	}

	l := waitLease(t, c, name)
	if got := *l.Spec.LeaseDurationSeconds; got != 40 {
		t.Errorf("lease duration %d s, want 40", got)
	}
	if got := *l.Spec.HolderIdentity; got != name {
		t.Errorf("lease holder %q, want %q", got, name)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: n.UID}}
	if diff := cmp.Diff(wantOwner, l.OwnerReferences); diff != "" {
		t.Errorf("lease owner (-want +got):\n%s", diff)
	}
}

func waitLease(t *testing.T, c kubernetes.Interface, name string) (l *coordinationv1.Lease) {
	t.Helper()
	eventually(t, 10*time.Second, "lease created", func() error {
		var err error
		l, err = getLease(t.Context(), c, name)
		return err
	})
	return l
}

// The Lease is renewed every quarter of its duration while the controller
// runs, and no longer once it stopped.
func TestLeaseRenewedUntilStopped(t *testing.T) {
	c := client(t)
	name := uniqueName("it-lease")
	cleanupNode(t, c, name)
	ctl := newNodeController(t, kubeconfig(t), name, node.Options{LeaseDuration: 4 * time.Second})
	stop := runInBackground(t, "node controller", ctl.Run)

	first := waitLease(t, c, name).Spec.RenewTime.Time
	var renewals []time.Time
	eventually(t, 10*time.Second, "three renewals", func() error {
		l, err := getLease(t.Context(), c, name)
		if err != nil {
			return err
		}
		rt := l.Spec.RenewTime.Time
		if len(renewals) == 0 || !rt.Equal(renewals[len(renewals)-1]) {
			renewals = append(renewals, rt)
		}
		if len(renewals) < 4 {
			return fmt.Errorf("renew times so far %v", renewals)
		}
		return nil
	})
	if !renewals[len(renewals)-1].After(first) {
		t.Errorf("renew time did not advance: %v", renewals)
	}
	for i := 1; i < len(renewals); i++ {
		if d := renewals[i].Sub(renewals[i-1]); d < 900*time.Millisecond || d > 2500*time.Millisecond {
			t.Errorf("renewal %d after %v, want about 1s (a quarter of 4s)", i, d)
		}
	}

	stop()
	stopped, err := getLease(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // three renew intervals
	after, err := getLease(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Spec.RenewTime.Equal(stopped.Spec.RenewTime) {
		t.Errorf("lease renewed after the controller stopped: %v, then %v", stopped.Spec.RenewTime, after.Spec.RenewTime)
	}
}

// A deleted Node is registered again (a new UID), becomes Ready, and the
// Lease's owner follows it.
func TestNodeReRegistered(t *testing.T) {
	c := client(t)
	name := uniqueName("it-rereg")
	cleanupNode(t, c, name)
	ctl := newNodeController(t, kubeconfig(t), name, node.Options{StatusUpdateFrequency: time.Second, LeaseDuration: 4 * time.Second})
	runInBackground(t, "node controller", ctl.Run)
	eventually(t, 10*time.Second, "node Ready", func() error { return nodeReady(t.Context(), c, name) })
	old, err := getNode(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	waitLease(t, c, name)

	if err := c.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var n *v1.Node
	eventually(t, 10*time.Second, "node registered again", func() error {
		var err error
		if n, err = getNode(t.Context(), c, name); err != nil {
			return err
		}
		if n.UID == old.UID {
			return errors.New("still the old node")
		}
		return nodeReady(t.Context(), c, name)
	})
	eventually(t, 10*time.Second, "lease owned by the new node", func() error {
		l, err := getLease(t.Context(), c, name)
		if err != nil {
			return err
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
			return fmt.Errorf("lease owners %v, want %s", l.OwnerReferences, n.UID)
		}
		return nil
	})
	if got, ok := ctl.Node(); !ok || got.UID != n.UID {
		t.Errorf("Controller.Node() = %v, want UID %s", got, n.UID)
	}
}

// The Ready condition follows the health callback through status PATCHes;
// a PATCH carrying another UID, as the controller's do, is refused.
func TestNodeReadyFollowsHealth(t *testing.T) {
	c := client(t)
	name := uniqueName("it-health")
	cleanupNode(t, c, name)
	var healthErr atomic.Pointer[error]
	ok := error(nil)
	healthErr.Store(&ok)
	ctl := newNodeController(t, kubeconfig(t), name, node.Options{
		StatusUpdateFrequency: 500 * time.Millisecond,
		Health:                func() error { return *healthErr.Load() },
	})
	runInBackground(t, "node controller", ctl.Run)
	eventually(t, 10*time.Second, "node Ready", func() error { return nodeReady(t.Context(), c, name) })

	bad := errors.New("pleg: relist is 3m0s old")
	healthErr.Store(&bad)
	eventually(t, 10*time.Second, "node not Ready", func() error {
		n, err := getNode(t.Context(), c, name)
		if err != nil {
			return err
		}
		if r := readyCondition(n); r == nil || r.Status != v1.ConditionFalse || r.Message != bad.Error() {
			return fmt.Errorf("Ready condition %+v", r)
		}
		return nil
	})
	healthErr.Store(&ok)
	eventually(t, 10*time.Second, "node Ready again", func() error { return nodeReady(t.Context(), c, name) })

	patch := []byte(`{"metadata":{"uid":"00000000-0000-0000-0000-000000000000"},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`)
	if _, err := c.CoreV1().Nodes().Patch(t.Context(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err == nil {
		t.Errorf("a status PATCH with another UID succeeded")
	}
}
