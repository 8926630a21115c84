package podruntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "x"},
		{"$(A)-$(B)", "x-y"},
		{"$$(A)", "$(A)"},
		{"$(MISSING)", "$(MISSING)"},
		{"$(unterminated", "$(unterminated"},
		{"a$b", "a$b"},
		{"end$", "end$"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, vars); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPullPolicyDefault(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"busybox", v1.PullAlways},
		{"busybox:latest", v1.PullAlways},
		{"busybox:1.36", v1.PullIfNotPresent},
		{"registry:5000/busybox", v1.PullAlways},
		{"registry:5000/busybox:1", v1.PullIfNotPresent},
		{"busybox@sha256:abcd", v1.PullIfNotPresent},
	}
	for _, tt := range tests {
		if got := pullPolicy(&v1.Container{Image: tt.image}); got != tt.want {
			t.Errorf("pullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
		}
	}
}

func TestPodHostname(t *testing.T) {
	long := "a123456789b123456789c123456789d123456789e123456789f123456789a.-xyz"
	if got := podHostname(&v1.Pod{}); got != "" {
		t.Errorf("empty pod hostname = %q", got)
	}
	p := &v1.Pod{}
	p.Name = long
	if got := podHostname(p); got != "a123456789b123456789c123456789d123456789e123456789f123456789a" {
		t.Errorf("long hostname = %q", got)
	}
	p.Spec.Hostname = "h"
	if got := podHostname(p); got != "h" {
		t.Errorf("spec hostname = %q", got)
	}
}
