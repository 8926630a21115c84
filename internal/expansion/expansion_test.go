package expansion

import "testing"

func TestExpand(t *testing.T) {
	vars := Map(map[string]string{"A": "a", "B": "$(A)", "EMPTY": ""})
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(A)", "xaya"},
		{"$(B)", "$(A)"}, // no recursion
		{"$(EMPTY)|", "|"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$", "$"},
		{"a$b", "a$b"},
		{"$(A", "$(A"},
		{"$()", "$()"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, vars); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$$", "$(", "x$(A)y"} {
		f.Add(s)
	}
	vars := Map(map[string]string{"A": "a"})
	f.Fuzz(func(t *testing.T, s string) {
		_ = Expand(s, vars)
	})
}
