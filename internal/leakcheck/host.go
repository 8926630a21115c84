package leakcheck

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	sysruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envDir names, in the environment of a test binary run by
// VerifyHostTestMain and of every process it starts, the binary's own
// temporary directory.
const envDir = "NODEKIT_LEAKCHECK_DIR"

// VerifyHostTestMain runs the tests of m and fails the run when they left
// behind, on the host, a process, a mount or a cgroup of theirs; it then
// removes what it found, so that a leak does not pile up run after run.
// It only checks as root on Linux (where tests make such objects); else
// it runs the tests.
//
// What is the tests' is told apart from what other runs on the host make
// without a list of before and after: the binary runs with a temporary
// directory of its own (TMPDIR, which t.TempDir uses, and envDir in the
// environment every process it starts inherits). A process is the
// tests' when its environment names that directory, or its command line,
// working directory, root or executable is under it (a container's
// process chrooted into an image unpacked there); a mount, when its mount
// point is under it; a cgroup, when it is named with CgroupPrefix at the
// top of a cgroup hierarchy.
//
// A binary the tests start again (a monitor, a helper) that calls
// VerifyHostTestMain runs its tests unchecked: the first binary checks.
func VerifyHostTestMain(m *testing.M) {
	os.Exit(runHost(m))
}

func runHost(m *testing.M) int {
	if os.Geteuid() != 0 || sysruntime.GOOS != "linux" || os.Getenv(envDir) != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "nodekit-leakcheck-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
		return 1
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
		return 1
	}
	os.Setenv("TMPDIR", dir)
	os.Setenv(envDir, dir)
	code := m.Run()
	var left []Object
	deadline := time.Now().Add(Timeout)
	for {
		// Processes killed at the end of a test may take a moment to go.
		left = HostObjects(dir, CgroupPrefix())
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "leakcheck: the tests left behind %d host objects (now removed):\n", len(left))
		for _, o := range left {
			fmt.Fprintf(&b, "\t%s\n", o)
		}
		fmt.Fprint(os.Stderr, b.String())
		Remove(left)
		code = 1
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: removing %s: %v\n", dir, err)
	}
	return code
}

// CgroupPrefix is how the tests of a binary run by VerifyHostTestMain
// name the cgroups they make at the top of a hierarchy, so that the
// check finds those left: "nodekit-test-<binary's token>-". Outside such
// a run it is "nodekit-test-".
func CgroupPrefix() string {
	d := os.Getenv(envDir)
	if d == "" {
		return "nodekit-test-"
	}
	return "nodekit-test-" + strings.TrimPrefix(filepath.Base(d), "nodekit-leakcheck-") + "-"
}

// Object is a host object a test left behind.
type Object struct {
	Kind string // "process", "mount" or "cgroup"
	// Pid of a process; Path of a mount point or a cgroup directory.
	Pid  int
	Path string
	// Why tells what ties it to the tests (a process's command line and
	// the link that matched).
	Why string
}

func (o Object) String() string {
	if o.Kind == "process" {
		return fmt.Sprintf("process %d: %s", o.Pid, o.Why)
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Path)
}

// HostObjects lists the processes, mounts and cgroups of the tests that
// ran with dir as their temporary directory, and cgroups named with
// cgroupPrefix at the top of a hierarchy.
func HostObjects(dir, cgroupPrefix string) []Object {
	var out []Object
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	ours := map[int]bool{}
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if why, ok := processOf(pid, dir); ok {
			out = append(out, Object{Kind: "process", Pid: pid, Why: why})
			ours[pid] = true
		} else if ppid, ok := parentOf(pid); ok {
			parents[pid] = ppid
		}
	}
	// The descendants of those are too (a container's process in a mount
	// namespace of its own, with an environment of its own).
	for found := true; found; {
		found = false
		for pid, ppid := range parents {
			if ours[ppid] {
				cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				why := strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
				out = append(out, Object{Kind: "process", Pid: pid, Why: fmt.Sprintf("%s (child of %d)", why, ppid)})
				ours[pid] = true
				delete(parents, pid)
				found = true
			}
		}
	}
	mounts, cgroupRoots := readMounts()
	for _, mp := range mounts {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, Object{Kind: "mount", Path: mp})
		}
	}
	for _, root := range cgroupRoots {
		cgs, _ := os.ReadDir(root)
		for _, c := range cgs {
			if c.IsDir() && strings.HasPrefix(c.Name(), cgroupPrefix) {
				out = append(out, Object{Kind: "cgroup", Path: filepath.Join(root, c.Name())})
			}
		}
	}
	return out
}

// processOf tells whether process pid is of the tests that ran in dir.
func processOf(pid int, dir string) (string, bool) {
	p := "/proc/" + strconv.Itoa(pid)
	cmd, err := os.ReadFile(p + "/cmdline")
	if err != nil || len(cmd) == 0 {
		return "", false // gone, or a kernel thread or zombie
	}
	cmdline := strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	env, _ := os.ReadFile(p + "/environ")
	if slices.Contains(strings.Split(string(env), "\x00"), envDir+"="+dir) {
		return cmdline + " (its environment)", true
	}
	if strings.Contains(cmdline, dir) {
		return cmdline + " (its command line)", true
	}
	for _, link := range []string{"cwd", "root", "exe"} {
		if t, err := os.Readlink(p + "/" + link); err == nil && (t == dir || strings.HasPrefix(t, dir+"/")) {
			return fmt.Sprintf("%s (%s %s)", cmdline, link, t), true
		}
	}
	return "", false
}

// parentOf reads the parent of process pid (/proc/pid/stat's fourth
// field, after the command's parenthesis).
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// readMounts returns the mount points of this mount namespace, deepest
// last, and the mount points of the cgroup hierarchies.
func readMounts() (mounts, cgroupRoots []string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 16<<20))
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) < 10 {
			continue
		}
		mp := unescapeMount(fields[4])
		mounts = append(mounts, mp)
		// After the optional fields, "-" then the file system type.
		if i := slices.Index(fields, "-"); i > 0 && i+1 < len(fields) && strings.HasPrefix(fields[i+1], "cgroup") {
			cgroupRoots = append(cgroupRoots, mp)
		}
	}
	return mounts, cgroupRoots
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Remove kills the processes, unmounts the mounts (deepest first) and
// removes the cgroups (deepest first) of objs, as far as it can.
func Remove(objs []Object) {
	var mounts, cgroups []string
	for _, o := range objs {
		switch o.Kind {
		case "process":
			syscall.Kill(o.Pid, syscall.SIGKILL)
		case "mount":
			mounts = append(mounts, o.Path)
		case "cgroup":
			cgroups = append(cgroups, o.Path)
		}
	}
	slices.Reverse(mounts)
	for _, mp := range mounts {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	for _, cg := range cgroups {
		removeCgroup(cg, time.Now().Add(5*time.Second))
	}
}

// removeCgroup removes a cgroup directory and the cgroups below it; a
// cgroup whose killed processes are not gone yet is tried until deadline.
func removeCgroup(dir string, deadline time.Time) {
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()), deadline)
		}
	}
	for os.Remove(dir) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}
