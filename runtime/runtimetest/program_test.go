package runtimetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseProgram(t *testing.T) {
	forever := program{forever: true}
	tests := []struct {
		name    string
		command []string
		args    []string
		want    program
	}{
		{"empty", nil, nil, forever},
		{"entrypoint only", []string{"nginx", "-g", "daemon off;"}, nil, forever},
		{"echo only", []string{"echo", "hi"}, nil, forever},
		{"sleep", []string{"sleep", "3600"}, nil, program{d: time.Hour}},
		{"sleep infinity", []string{"sleep", "infinity"}, nil, forever},
		{"sh -c script", []string{"sh", "-c"}, []string{"echo hi; sleep 2; exit 1"}, program{d: 2 * time.Second, code: 1}},
		{"bin sh with flags", []string{"/bin/sh", "-ec", "sleep 5"}, nil, program{d: 5 * time.Second}},
		{"fractional sleeps add up", []string{"sh", "-c", "sleep 0.5 && sleep 1.25"}, nil, program{d: 1750 * time.Millisecond}},
		{"sleep suffixes", []string{"sh", "-c", "sleep 1m; sleep 2s; sleep 1h"}, nil, program{d: time.Hour + time.Minute + 2*time.Second}},
		{"newlines", []string{"sh", "-c", "sleep 1\nexit 3\nsleep 10"}, nil, program{d: time.Second, code: 3}},
		{"first exit wins", []string{"sh", "-c", "exit 4; exit 5"}, nil, program{code: 4}},
		{"exit modulo 256", []string{"sh", "-c", "exit 257"}, nil, program{code: 1}},
		{"exit without number keeps last status", []string{"sh", "-c", "false; exit"}, nil, program{code: 1}},
		{"exit with garbage", []string{"sh", "-c", "exit x"}, nil, program{code: 2}},
		{"true", []string{"true"}, nil, program{}},
		{"false", []string{"false"}, nil, program{code: 1}},
		{"false at the end", []string{"sh", "-c", "sleep 1; false"}, nil, program{d: time.Second, code: 1}},
		{"false then sleep", []string{"sh", "-c", "false; sleep 1"}, nil, program{d: time.Second}},
		{"echo after true", []string{"sh", "-c", "true; echo done"}, nil, program{}},
		{"exec sleep", []string{"sh", "-c", "exec sleep 10"}, nil, program{d: 10 * time.Second}},
		{"quoted", []string{"sh", "-c", "'sleep' '3'"}, nil, program{d: 3 * time.Second}},
		{"while loop", []string{"sh", "-c", "while true; do sleep 1; done"}, nil, forever},
		{"bad sleep ignored", []string{"sh", "-c", "sleep abc"}, nil, forever},
		{"huge sleep", []string{"sleep", "1e30"}, nil, forever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseProgram(tt.command, tt.args)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(program{})); diff != "" {
				t.Errorf("parseProgram(%q, %q) (-want +got):\n%s", tt.command, tt.args, diff)
			}
		})
	}
}

func TestNormalizeRef(t *testing.T) {
	tests := []struct{ in, want string }{
		{"busybox", "docker.io/library/busybox:latest"},
		{"busybox:1.36", "docker.io/library/busybox:1.36"},
		{"user/app", "docker.io/user/app:latest"},
		{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"localhost:5000/app", "localhost:5000/app:latest"},
		{"localhost/app", "localhost/app:latest"},
		{"busybox@sha256:abc", "docker.io/library/busybox@sha256:abc"},
		{"sha256:abc", "sha256:abc"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := normalizeRef(tt.in); got != tt.want {
				t.Errorf("normalizeRef(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
