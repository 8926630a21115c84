package podmodel

import "testing"

func TestRuntimeContainerID(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"containerd://abc", "abc", true},
		{"cri-o://x://y", "x://y", true},
		{"docker://", "", true},
		{"abc", "abc", false},
		{"", "", false},
	} {
		got, ok := RuntimeContainerID(tc.in)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("RuntimeContainerID(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}
