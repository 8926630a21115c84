package sources

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		// wantErr are substrings of the error; none means valid.
		wantErr []string
	}{
		{name: "valid", pod: testPod("a")},
		{name: "valid with init containers and OnFailure", pod: testPod("a", func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyOnFailure
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "x"}}
		})},
		{name: "valid subdomain name", pod: testPod("a.b-c")},
		{name: "valid empty namespace", pod: testPod("a", withNamespace(""))},
		{name: "empty name", pod: testPod(""), wantErr: []string{"metadata.name: Required value"}},
		{name: "name not a DNS subdomain", pod: testPod("A_b"), wantErr: []string{"metadata.name: Invalid value"}},
		{name: "namespace not a DNS label", pod: testPod("a", withNamespace("a.b")), wantErr: []string{"metadata.namespace: Invalid value"}},
		{name: "empty UID", pod: testPod("a", withUID("")), wantErr: []string{"metadata.uid: Required value"}},
		{name: "no containers", pod: testPod("a", func(p *v1.Pod) { p.Spec.Containers = nil }),
			wantErr: []string{"spec.containers: Required value"}},
		{name: "empty container name", pod: testPod("a", func(p *v1.Pod) { p.Spec.Containers[0].Name = "" }),
			wantErr: []string{"spec.containers[0].name: Required value"}},
		{name: "container name not a DNS label", pod: testPod("a", func(p *v1.Pod) { p.Spec.Containers[0].Name = "a.b" }),
			wantErr: []string{"spec.containers[0].name: Invalid value"}},
		{name: "duplicate container names", pod: testPod("a", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Image: "x"})
		}), wantErr: []string{`spec.containers[1].name: Duplicate value: "c"`}},
		{name: "init container name reused by a container", pod: testPod("a", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "c", Image: "x"}}
		}), wantErr: []string{`spec.containers[0].name: Duplicate value: "c"`}},
		{name: "init container without image", pod: testPod("a", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i"}}
		}), wantErr: []string{"spec.initContainers[0].image: Required value"}},
		{name: "empty init container name", pod: testPod("a", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Image: "x"}}
		}), wantErr: []string{"spec.initContainers[0].name: Required value"}},
		{name: "empty image", pod: testPod("a", withImage("")), wantErr: []string{"spec.containers[0].image: Required value"}},
		{name: "empty restart policy", pod: testPod("a", func(p *v1.Pod) { p.Spec.RestartPolicy = "" }),
			wantErr: []string{"spec.restartPolicy: Required value"}},
		{name: "unknown restart policy", pod: testPod("a", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }),
			wantErr: []string{"spec.restartPolicy: Unsupported value"}},
		{name: "several errors are all named", pod: testPod("", withUID(""), withImage("")),
			wantErr: []string{"metadata.name", "metadata.uid", "spec.containers[0].image", "sources: invalid pod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.pod)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.wantErr)
			}
			for _, sub := range tt.wantErr {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("Validate() = %q, want it to contain %q", err, sub)
				}
			}
		})
	}
}
