package cgroup

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseMountinfoLine(t *testing.T) {
	tests := []struct {
		line    string
		want    mount
		wantErr bool
	}{{
		line: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
		want: mount{ID: 36, Parent: 35, MajorMinor: "98:0", Root: "/mnt1", Mountpoint: "/mnt2", Options: "rw,noatime",
			Optional: []string{"master:1"}, FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"},
	}, {
		line: "30 24 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
		want: mount{ID: 30, Parent: 24, MajorMinor: "0:26", Root: "/", Mountpoint: "/sys/fs/cgroup/cpu", Options: "rw,relatime",
			FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,cpu"},
	}, {
		line: "31 24 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:9 shared:10 - cgroup2 cgroup2 rw,nsdelegate",
		want: mount{ID: 31, Parent: 24, MajorMinor: "0:27", Root: "/", Mountpoint: "/sys/fs/cgroup/unified", Options: "rw,nosuid",
			Optional: []string{"shared:9", "shared:10"}, FSType: "cgroup2", Source: "cgroup2", SuperOptions: "rw,nsdelegate"},
	}, {
		line: `40 24 0:30 /a\040b /mnt/with\040space\134x rw - tmpfs tmp\011fs rw`,
		want: mount{ID: 40, Parent: 24, MajorMinor: "0:30", Root: "/a b", Mountpoint: `/mnt/with space\x`, Options: "rw",
			FSType: "tmpfs", Source: "tmp\tfs", SuperOptions: "rw"},
	}, {
		line: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw", wantErr: true, // no separator
	}, {
		line: "x 35 98:0 / /mnt rw - ext3 /dev/root rw", wantErr: true,
	}, {
		line: `36 35 98:0 / /mnt\04 rw - ext3 /dev/root rw`, wantErr: true, // truncated escape
	}, {
		line: `36 35 98:0 / /mnt\999 rw - ext3 /dev/root rw`, wantErr: true,
	}, {
		line: "36 35 98:0 / /mnt rw -", wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := parseMountinfoLine(tt.line)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func escapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\\' {
			fmt.Fprintf(&b, `\%03o`, c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzParseMountinfoLine checks that any line parses without panicking and
// that a line built from arbitrary paths parses back to them.
func FuzzParseMountinfoLine(f *testing.F) {
	f.Add("30 24 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu", "/", "/sys/fs/cgroup/cpu", "cgroup")
	f.Add(`40 24 0:30 /a\040b /mnt/x rw shared:1 - tmpfs tmpfs rw`, "/a b", "/mnt/with space", "dev\\x")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, line, root, mountpoint, source string) {
		if m, err := parseMountinfoLine(line); err == nil {
			if m.FSType == "" && m.Source == "" && m.SuperOptions == "" && !strings.Contains(line, " - ") {
				t.Fatalf("parsed %q without a separator: %+v", line, m)
			}
		}
		for _, s := range []string{root, mountpoint, source} {
			if s == "" {
				return
			}
		}
		built := fmt.Sprintf("1 2 3:4 %s %s rw - cgroup %s rw,cpu", escapeMountPath(root), escapeMountPath(mountpoint), escapeMountPath(source))
		m, err := parseMountinfoLine(built)
		if err != nil {
			t.Fatalf("parse %q: %v", built, err)
		}
		want := mount{ID: 1, Parent: 2, MajorMinor: "3:4", Root: root, Mountpoint: mountpoint, Options: "rw", FSType: "cgroup", Source: source, SuperOptions: "rw,cpu"}
		if diff := cmp.Diff(want, m, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("parse %q (-want +got):\n%s", built, diff)
		}
	})
}

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in      string
		quota   int64
		period  uint64
		wantErr bool
	}{
		{in: "max 100000", quota: -1, period: 100000},
		{in: "50000 100000\n", quota: 50000, period: 100000},
		{in: "max", quota: -1},
		{in: "2000", quota: 2000},
		{in: "", wantErr: true},
		{in: "0 100000", wantErr: true},
		{in: "-5 100000", wantErr: true},
		{in: "max 0", wantErr: true},
		{in: "max 1 2", wantErr: true},
		{in: "max abc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			q, p, err := ParseCPUMax(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (q != tt.quota || p != tt.period) {
				t.Errorf("ParseCPUMax(%q) = %d, %d; want %d, %d", tt.in, q, p, tt.quota, tt.period)
			}
		})
	}
}

func TestFormatCPUMax(t *testing.T) {
	q := func(v int64) *int64 { return &v }
	p := func(v uint64) *uint64 { return &v }
	tests := []struct {
		quota  *int64
		period *uint64
		want   string
	}{
		{nil, nil, ""},
		{q(0), p(0), ""},
		{q(50000), p(100000), "50000 100000"},
		{q(-1), p(100000), "max 100000"},
		{q(-1), nil, "max"},
		{nil, p(100000), "max 100000"},
		{q(1000), nil, "1000"},
	}
	for _, tt := range tests {
		if got := FormatCPUMax(tt.quota, tt.period); got != tt.want {
			t.Errorf("FormatCPUMax(%v, %v) = %q, want %q", tt.quota, tt.period, got, tt.want)
		}
	}
}

// FuzzParseCPUMax checks that whatever parses formats back to a value that
// parses to the same numbers.
func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "50000 100000", "max", "1", "0 0", " 9223372036854775807 18446744073709551615 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, p, err := ParseCPUMax(s)
		if err != nil {
			return
		}
		if q == 0 || q < -1 {
			t.Fatalf("ParseCPUMax(%q) quota %d", s, q)
		}
		var pp *uint64
		if p != 0 {
			pp = &p
		}
		out := FormatCPUMax(&q, pp)
		q2, p2, err := ParseCPUMax(out)
		if err != nil || q2 != q || p2 != p {
			t.Fatalf("ParseCPUMax(%q) = %d %d; formatted %q parses to %d %d %v", s, q, p, out, q2, p2, err)
		}
	})
}

func TestParseFlatKeyed(t *testing.T) {
	got, err := ParseFlatKeyed([]byte("cache 4096\ntotal_inactive_file 8192\n\nhierarchical_memory_limit 9223372036854771712\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"cache": 4096, "total_inactive_file": 8192, "hierarchical_memory_limit": 9223372036854771712}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"cache", "cache x", "a 1 2", "neg -1"} {
		if _, err := ParseFlatKeyed([]byte(bad)); err == nil {
			t.Errorf("ParseFlatKeyed(%q) succeeded", bad)
		}
	}
}

// FuzzParseFlatKeyed checks that whatever parses serializes back to the
// same map (memory.stat, cpu.stat).
func FuzzParseFlatKeyed(f *testing.F) {
	f.Add([]byte("usage_usec 100\nuser_usec 50\nsystem_usec 50\n"))
	f.Add([]byte("anon 0\nfile 4096\ninactive_file 4096\n"))
	f.Add([]byte("x 18446744073709551615"))
	f.Fuzz(func(t *testing.T, data []byte) {
		kv, err := ParseFlatKeyed(data)
		if err != nil {
			return
		}
		var b strings.Builder
		for k, v := range kv {
			b.WriteString(k + " " + strconv.FormatUint(v, 10) + "\n")
		}
		again, err := ParseFlatKeyed([]byte(b.String()))
		if err != nil {
			t.Fatalf("reparse of %q: %v", b.String(), err)
		}
		if diff := cmp.Diff(kv, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
