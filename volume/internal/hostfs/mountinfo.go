package hostfs

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// MountInfo is one line of /proc/<pid>/mountinfo.
type MountInfo struct {
	// MountPoint is where the file system is mounted, unescaped.
	MountPoint string
	// FSType is the file system type, e.g. "tmpfs".
	FSType string
	// Source is the mount source, e.g. "tmpfs" or "/dev/vda1".
	Source string
	// Options are the per-mount options, e.g. "rw,relatime".
	Options string
}

// ParseMountInfo parses the mountinfo format of proc(5):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Fields are separated by single spaces; the optional fields end with "-".
// Spaces, tabs, newlines and backslashes in paths appear as octal escapes
// (\040, \011, \012, \134).
func ParseMountInfo(r io.Reader) ([]MountInfo, error) {
	var mounts []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" {
			continue
		}
		fields := strings.Split(text, " ")
		if len(fields) < 10 {
			return nil, fmt.Errorf("mountinfo line %d: %d fields, want at least 10", line, len(fields))
		}
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 > len(fields) {
			return nil, fmt.Errorf("mountinfo line %d: no \"-\" separator before the file system type", line)
		}
		mounts = append(mounts, MountInfo{
			MountPoint: unescapeOctal(fields[4]),
			Options:    fields[5],
			FSType:     fields[sep+1],
			Source:     unescapeOctal(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return mounts, nil
}

// unescapeOctal turns the \ooo escapes of mountinfo back into bytes;
// anything else is kept as it is.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Under returns the mounts whose mount point is dir or below it (dir
// absolute, clean and physical, as Resolve returns it), deepest first and,
// among mounts stacked on one point, the last mounted first: the order in
// which to unmount them.
func Under(mounts []MountInfo, dir string) []MountInfo {
	var out []MountInfo
	for i := len(mounts) - 1; i >= 0; i-- {
		if Within(mounts[i].MountPoint, dir) {
			out = append(out, mounts[i])
		}
	}
	slices.SortStableFunc(out, func(a, b MountInfo) int {
		return strings.Count(b.MountPoint, "/") - strings.Count(a.MountPoint, "/")
	})
	return out
}
