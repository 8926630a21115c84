package podmodel

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestContainerShouldRestart holds the kubelet's ContainerShouldRestart
// cases: rules first, then the container's policy, then the pod's.
func TestContainerShouldRestart(t *testing.T) {
	p := func(rp v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &rp }
	in := func(a v1.ContainerRestartRuleAction, codes ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: a, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
	}
	notIn := func(a v1.ContainerRestartRuleAction, codes ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: a, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpNotIn, Values: codes}}
	}
	tests := []struct {
		name      string
		container v1.Container
		pod       v1.RestartPolicy
		exit      int32
		want      bool
	}{
		{"pod Always", v1.Container{}, v1.RestartPolicyAlways, 0, true},
		{"pod unset defaults to Always", v1.Container{}, "", 0, true},
		{"pod OnFailure, exit 0", v1.Container{}, v1.RestartPolicyOnFailure, 0, false},
		{"pod OnFailure, exit 1", v1.Container{}, v1.RestartPolicyOnFailure, 1, true},
		{"pod Never", v1.Container{}, v1.RestartPolicyNever, 1, false},
		{"container Never overrides pod Always", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever)}, v1.RestartPolicyAlways, 1, false},
		{"container Always overrides pod Never", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyAlways)}, v1.RestartPolicyNever, 0, true},
		{"container OnFailure, exit 0", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyOnFailure)}, v1.RestartPolicyAlways, 0, false},
		{"rule In matches", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{in(v1.ContainerRestartRuleActionRestart, 42)}}, v1.RestartPolicyNever, 42, true},
		{"rule In does not match: container policy", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{in(v1.ContainerRestartRuleActionRestart, 42)}}, v1.RestartPolicyAlways, 1, false},
		{"rule NotIn matches", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{notIn(v1.ContainerRestartRuleActionRestart, 0)}}, v1.RestartPolicyNever, 3, true},
		{"RestartAllContainers rule restarts", v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{in(v1.ContainerRestartRuleActionRestartAllContainers, 7)}}, v1.RestartPolicyNever, 7, true},
		{"rules without a container policy are not read", v1.Container{
			RestartPolicyRules: []v1.ContainerRestartRule{in(v1.ContainerRestartRuleActionRestart, 42)}}, v1.RestartPolicyNever, 42, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ContainerShouldRestart(&tt.container, &v1.PodSpec{RestartPolicy: tt.pod}, tt.exit); got != tt.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMatchingRestartRuleFirstWins(t *testing.T) {
	c := &v1.Container{RestartPolicyRules: []v1.ContainerRestartRule{
		{Action: v1.ContainerRestartRuleActionRestartAllContainers, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{1, 2}}},
		{Action: v1.ContainerRestartRuleActionRestart, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}},
		{Action: v1.ContainerRestartRuleActionRestart},
	}}
	for code, want := range map[int32]v1.ContainerRestartRuleAction{1: v1.ContainerRestartRuleActionRestartAllContainers, 3: v1.ContainerRestartRuleActionRestart} {
		if r, ok := MatchingRestartRule(c, code); !ok || r.Action != want {
			t.Errorf("exit %d: rule %v %v, want %s", code, r.Action, ok, want)
		}
	}
	if _, ok := MatchingRestartRule(c, 0); ok {
		t.Error("exit 0 matched a rule")
	}
	if !TriggersRestartAll(c, 2) || TriggersRestartAll(c, 3) {
		t.Error("TriggersRestartAll wrong for exit 2 or 3")
	}
	if !AllContainersCouldRestart(&v1.PodSpec{InitContainers: []v1.Container{*c}}) || AllContainersCouldRestart(&v1.PodSpec{Containers: []v1.Container{{Name: "x"}}}) {
		t.Error("AllContainersCouldRestart wrong")
	}
}

func TestIsContainerRestartable(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	spec := &v1.PodSpec{RestartPolicy: v1.RestartPolicyNever}
	if IsContainerRestartable(spec, &v1.Container{}) {
		t.Error("pod Never: restartable")
	}
	if !IsContainerRestartable(spec, &v1.Container{RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}}) {
		t.Error("a Restart rule: not restartable")
	}
	if IsContainerRestartable(&v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways}, &v1.Container{RestartPolicy: &never}) {
		t.Error("container Never: restartable")
	}
}

func TestStaticPodForbiddenReference(t *testing.T) {
	ok := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{}}}}}}}}}
	if err := StaticPodForbiddenReference(ok); err != nil {
		t.Errorf("downward API projection: %v", err)
	}
	ctb := ok.DeepCopy()
	ctb.Spec.Volumes[0].Projected.Sources = append(ctb.Spec.Volumes[0].Projected.Sources, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "ca.pem"}})
	if err := StaticPodForbiddenReference(ctb); !errors.Is(err, ErrStaticPodClusterTrustBundle) {
		t.Errorf("ClusterTrustBundle projection: %v", err)
	}
	claims := &v1.Pod{Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu"}}}}
	if err := StaticPodForbiddenReference(claims); !errors.Is(err, ErrStaticPodResourceClaims) {
		t.Errorf("ResourceClaims: %v", err)
	}
}
