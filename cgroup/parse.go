package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo (proc(5)).
type mount struct {
	ID, Parent   int
	MajorMinor   string
	Root         string
	Mountpoint   string
	Options      string
	Optional     []string
	FSType       string
	Source       string
	SuperOptions string
}

// parseMountinfoLine parses one line of /proc/self/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Paths have their octal escapes (\040 for a space, ...) undone.
func parseMountinfoLine(line string) (mount, error) {
	var m mount
	fields := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 10 || sep < 0 || len(fields) < sep+4 {
		return m, fmt.Errorf("cgroup: mountinfo line %q: too few fields", line)
	}
	var err error
	if m.ID, err = strconv.Atoi(fields[0]); err != nil {
		return m, fmt.Errorf("cgroup: mountinfo line %q: mount ID: %w", line, err)
	}
	if m.Parent, err = strconv.Atoi(fields[1]); err != nil {
		return m, fmt.Errorf("cgroup: mountinfo line %q: parent ID: %w", line, err)
	}
	if !strings.Contains(fields[2], ":") {
		return m, fmt.Errorf("cgroup: mountinfo line %q: bad major:minor %q", line, fields[2])
	}
	m.MajorMinor = fields[2]
	if m.Root, err = unescapeMountPath(fields[3]); err != nil {
		return m, fmt.Errorf("cgroup: mountinfo line %q: root: %w", line, err)
	}
	if m.Mountpoint, err = unescapeMountPath(fields[4]); err != nil {
		return m, fmt.Errorf("cgroup: mountinfo line %q: mount point: %w", line, err)
	}
	m.Options = fields[5]
	if sep > 6 {
		m.Optional = fields[6:sep]
	}
	m.FSType = fields[sep+1]
	if m.Source, err = unescapeMountPath(fields[sep+2]); err != nil {
		return m, fmt.Errorf("cgroup: mountinfo line %q: source: %w", line, err)
	}
	m.SuperOptions = strings.Join(fields[sep+3:], " ")
	return m, nil
}

// unescapeMountPath undoes the kernel's octal escapes (\ooo) of mountinfo
// paths.
func unescapeMountPath(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 >= len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// parseMountinfo parses a whole mountinfo file.
func parseMountinfo(r io.Reader) ([]mount, error) {
	var mounts []mount
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		if line == "" {
			continue
		}
		m, err := parseMountinfoLine(line)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, m)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("cgroup: read mountinfo: %w", err)
	}
	return mounts, nil
}

// ParseCPUMax parses the content of a cgroup v2 cpu.max file: "max 100000"
// or "50000 100000" (a lone quota is accepted too). The quota is -1 for
// "max"; the period is 0 when absent.
func ParseCPUMax(s string) (quota int64, period uint64, err error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return 0, 0, fmt.Errorf("cgroup: cpu.max %q: want \"$MAX $PERIOD\"", s)
	}
	if fields[0] == "max" {
		quota = -1
	} else {
		quota, err = strconv.ParseInt(fields[0], 10, 64)
		if err != nil || quota <= 0 {
			return 0, 0, fmt.Errorf("cgroup: cpu.max %q: bad quota %q", s, fields[0])
		}
	}
	if len(fields) == 2 {
		period, err = strconv.ParseUint(fields[1], 10, 64)
		if err != nil || period == 0 {
			return 0, 0, fmt.Errorf("cgroup: cpu.max %q: bad period %q", s, fields[1])
		}
	}
	return quota, period, nil
}

// FormatCPUMax is the cpu.max value for a CFS quota and period as runc
// writes it: the quota, or "max" when it is not positive, then the period
// when it is set. It returns "" when both are nil (nothing to write).
func FormatCPUMax(quota *int64, period *uint64) string {
	if (quota == nil || *quota == 0) && (period == nil || *period == 0) {
		return ""
	}
	s := "max"
	if quota != nil && *quota > 0 {
		s = strconv.FormatInt(*quota, 10)
	}
	if period != nil && *period != 0 {
		s += " " + strconv.FormatUint(*period, 10)
	}
	return s
}

// ParseFlatKeyed parses a flat-keyed cgroup file such as memory.stat or
// cpu.stat: one "key value" pair a line, values unsigned integers.
func ParseFlatKeyed(data []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fields := strings.Fields(string(line))
		if len(fields) != 2 {
			return nil, fmt.Errorf("cgroup: line %q: want \"key value\"", line)
		}
		v, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cgroup: line %q: %w", line, errors.Unwrap(err))
		}
		out[fields[0]] = v
	}
	return out, nil
}

// parseInt64OrMax parses a number or "max" (-1).
func parseInt64OrMax(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// parsePids parses cgroup.procs: one pid a line.
func parsePids(data []byte) ([]int, error) {
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("cgroup: bad pid %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
