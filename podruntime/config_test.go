package podruntime

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/expansion"
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
		c := &v1.Container{Command: []string{tt.in}, Args: []string{tt.in}}
		command, args, err := expandCommand(c, vars)
		if err != nil || command[0] != tt.want || args[0] != tt.want {
			t.Errorf("expandCommand(%q) = %q, %q, %v, want %q", tt.in, command, args, err, tt.want)
		}
	}
}

// TestExpandCommandBomb checks the bounds of an expanded command line: an
// element past expansion.MaxValueBytes, or a command line past
// expansion.MaxTotalBytes, fails with an error naming the element.
func TestExpandCommandBomb(t *testing.T) {
	v1MiB := strings.Repeat("v", 1<<20)
	vars := map[string]string{"V1": v1MiB}
	tests := []struct {
		name    string
		c       v1.Container
		wantErr string
	}{
		{"one element", v1.Container{Command: []string{"sh", "-c", strings.Repeat("$(V1)", 16)}},
			"command[2]: too long: more than 1048576 bytes after $(VAR) expansion"},
		{"one arg", v1.Container{Args: []string{"$(V1)", "x$(V1)"}},
			"args[1]: too long: more than 1048576 bytes after $(VAR) expansion"},
		{"the whole", v1.Container{Command: []string{"sh"}, Args: slices.Repeat([]string{"$(V1)"}, 16)},
			"args[7]: too long: the command line would exceed 8388608 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			command, args, err := expandCommand(&tt.c, vars)
			if !errors.Is(err, expansion.ErrTooLong) || err.Error() != tt.wantErr {
				t.Fatalf("expandCommand = %d, %d elements, %v, want %q", len(command), len(args), err, tt.wantErr)
			}
		})
	}
	// Up to the bounds, the command line is whole.
	c := &v1.Container{Command: []string{"$(V1)"}, Args: slices.Repeat([]string{"$(V1)"}, 7)}
	command, args, err := expandCommand(c, vars)
	if err != nil || len(command[0]) != 1<<20 || len(args) != 7 {
		t.Fatalf("expandCommand at the bound = %d, %d elements, %v", len(command), len(args), err)
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
