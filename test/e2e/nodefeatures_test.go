package e2e

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
)

// TestNodeFeatures: the Node's status.features is what the runtime's CRI
// Status reports, as the kubelet's NodeFeatures setter: on containerd 2.x,
// which reports the Strict supplemental groups policy,
// supplementalGroupsPolicy is true; containerd 1.6 reports no features and
// the Node has no status.features.
func TestNodeFeatures(t *testing.T) {
	for _, tt := range []struct {
		name, endpoint string
		want           func() *v1.NodeFeatures
	}{
		{name: "containerd 1.6", endpoint: envEndpoint, want: func() *v1.NodeFeatures { return nil }},
		{name: "containerd 2.x", endpoint: envEndpoint2, want: func() *v1.NodeFeatures {
			yes := true
			return &v1.NodeFeatures{SupplementalGroupsPolicy: &yes}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClusterOn(t, newFixture(t, tt.endpoint), false)
			st, err := c.cri.Status(t.Context(), false)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want()
			if got := node.RuntimeFeatures(st.GetFeatures()); !equality.Semantic.DeepEqual(want, got) {
				t.Fatalf("%s reports features %v; this test expects %s", tt.name, st.GetFeatures(), featuresString(want))
			}
			c.agentWith(nil, "node features", func(o *nodekit.Options) {
				o.KubeClient = c.agentAPI
				o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
			})
			eventuallyNil(t, 30*time.Second, "the Node Ready with the runtime's status.features", func() error {
				n, err := c.api.CoreV1().Nodes().Get(t.Context(), c.node, metav1.GetOptions{})
				if err != nil {
					return err
				}
				ready := false
				for _, cond := range n.Status.Conditions {
					ready = ready || cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue
				}
				if !ready {
					return fmt.Errorf("node %s not Ready", c.node)
				}
				if !equality.Semantic.DeepEqual(want, n.Status.Features) {
					return fmt.Errorf("node %s: status.features %s, want %s", c.node, featuresString(n.Status.Features), featuresString(want))
				}
				t.Logf("node %s on %s: status.features %s", c.node, tt.name, featuresString(n.Status.Features))
				return nil
			})
		})
	}
}

func featuresString(f *v1.NodeFeatures) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("{supplementalGroupsPolicy: %s}", ptrString(f.SupplementalGroupsPolicy))
}
