package expansion

import (
	"errors"
	"strings"
	"testing"
)

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
		{"x$(A", "x$(A"},
		{"$()", "$()"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in, vars, MaxValueBytes)
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestExpandBound checks that a result is refused past its bound, and
// allowed up to it, whichever part (a value, a kept reference, an escape,
// plain text) crosses it.
func TestExpandBound(t *testing.T) {
	vars := Map(map[string]string{"K": strings.Repeat("k", 1024)})
	tests := []struct {
		in      string
		max     int
		wantErr bool
	}{
		{strings.Repeat("$(K)", 4), 4096, false},
		{strings.Repeat("$(K)", 4) + "x", 4096, true},
		{strings.Repeat("$(K)", 5), 4096, true},
		{strings.Repeat("x", 10), 10, false},
		{strings.Repeat("x", 11), 10, true},
		{"$(UNKNOWN)", 9, true},
		{"$(UNKNOWN)", 10, false},
		{"$$$$", 2, false},
		{"$$$$$", 2, true},
		{"abc$(K", 5, true},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in, vars, tt.max)
		if tt.wantErr {
			if !errors.Is(err, ErrTooLong) {
				t.Errorf("Expand(%.20q, max %d) = %d bytes, %v, want ErrTooLong", tt.in, tt.max, len(got), err)
			}
			continue
		}
		if err != nil || len(got) > tt.max {
			t.Errorf("Expand(%.20q, max %d) = %d bytes, %v", tt.in, tt.max, len(got), err)
		}
	}
}

// TestExpandStopsAtBound checks that the expansion stops at the first
// value that crosses the bound: a bomb of 64 references to a 1 MiB value
// is refused after two of them, having built at most 1 MiB.
func TestExpandStopsAtBound(t *testing.T) {
	big := strings.Repeat("v", MaxValueBytes)
	lookups := 0
	lookup := func(name string) (string, bool) {
		lookups++
		return big, true
	}
	_, err := Expand(strings.Repeat("$(BIG)", 64), lookup, MaxValueBytes)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
	if lookups != 2 {
		t.Errorf("%d lookups, want 2: the expansion went on past its bound", lookups)
	}
	if want := "too long: more than 1048576 bytes after $(VAR) expansion"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestBudget(t *testing.T) {
	vars := Map(map[string]string{"K": strings.Repeat("k", 1000)})
	b := NewBudget("the environment", 4000)
	for i := range 3 {
		if _, err := b.Expand("$(K)", vars, 1500, 5); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	// 3 × 1005 used: 995 left, not enough for 1005 more.
	_, err := b.Expand("$(K)", vars, 1500, 5)
	if !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "the environment would exceed 4000 bytes") {
		t.Fatalf("fourth value: err = %v, want the environment's bound", err)
	}
	// One value past its own bound names the value's bound.
	_, err = NewBudget("the environment", 1<<20).Expand("$(K)$(K)", vars, 1500, 0)
	if !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "more than 1500 bytes") {
		t.Fatalf("big value: err = %v, want the value's bound", err)
	}
	b.Give(1005)
	if err := b.Take(1000); err != nil {
		t.Fatalf("Take after Give: %v", err)
	}
	if err := b.Take(1000); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Take past the bound: %v", err)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$$", "$(", "x$(A)y", "$(A)$(A)$(A)$(A)"} {
		f.Add(s, 8)
	}
	vars := Map(map[string]string{"A": "aaaa"})
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max & 0xffff
		got, err := Expand(s, vars, max)
		if err == nil && len(got) > max {
			t.Fatalf("Expand(%q, %d) = %d bytes", s, max, len(got))
		}
		if errors.Is(err, ErrTooLong) {
			unbounded, _ := Expand(s, vars, 1<<30)
			if len(unbounded) <= max {
				t.Fatalf("Expand(%q, %d) refused a result of %d bytes", s, max, len(unbounded))
			}
		}
	})
}
