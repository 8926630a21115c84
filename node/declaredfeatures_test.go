package node_test

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-helpers/nodedeclaredfeatures"
	ndftypes "k8s.io/component-helpers/nodedeclaredfeatures/types"

	"github.com/nodekit/nodekit/node"
)

// TestDeclaredFeatures: the Node declares the features nodekit implements,
// and a pod using restartPolicyRules' RestartAllContainers action matches
// it as the scheduler matches one.
func TestDeclaredFeatures(t *testing.T) {
	got := node.DeclaredFeatures()
	for _, want := range []string{"InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits", "InPlacePodLevelResourcesVerticalScaling"} {
		if !slices.Contains(got, want) {
			t.Errorf("declared %v, want %s among them", got, want)
		}
	}
	for _, not := range []string{"ExtendWebSocketsToKubelet", "UserNamespacesHostNetworkSupport"} {
		if slices.Contains(got, not) {
			t.Errorf("declared %v, with %s, which nodekit does not implement", got, not)
		}
	}

	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "main",
		RestartPolicyRules: []v1.ContainerRestartRule{{
			Action:    v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}},
	}}}}
	fw := nodedeclaredfeatures.DefaultFramework
	need, err := fw.InferForPodScheduling(&ndftypes.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, version.MustParseGeneric(node.KubernetesVersion()))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := fw.MatchNode(need, &v1.Node{}); err != nil || res.IsMatch {
		t.Errorf("a RestartAllContainers pod matches a node declaring nothing: %+v, %v", res, err)
	}
	res, err := fw.MatchNode(need, &v1.Node{Status: v1.NodeStatus{DeclaredFeatures: got}})
	if err != nil || !res.IsMatch {
		t.Errorf("a RestartAllContainers pod does not match the node: %+v, %v", res, err)
	}
}
