package leakcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	sysruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostObjects, as root: processes that inherited the binary's
// directory in their environment, that run in it, and their children, a
// mount below it and a cgroup named with the prefix are found, and other
// processes are not; Remove removes them all.
func TestHostObjects(t *testing.T) {
	if os.Geteuid() != 0 || sysruntime.GOOS != "linux" {
		t.Skip("needs root on Linux: makes processes, a mount and a cgroup")
	}
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	prefix := "nodekit-test-leakcheck-" + filepath.Base(dir) + "-"
	start := func(cwd string, env []string, args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = cwd, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd
	}
	inherited := start("/", []string{envDir + "=" + dir}, "sleep", "60")
	inside := start(dir, nil, "sleep", "60")
	// A shell whose child runs in its own environment and directory.
	parent := start("/", []string{envDir + "=" + dir}, "sh", "-c", "env -i sleep 61 & wait")
	other := start("/", []string{envDir + "=/elsewhere"}, "sleep", "60")

	mp := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mp, syscall.MNT_DETACH) })
	_, roots := readMounts()
	if len(roots) == 0 {
		t.Fatal("no cgroup file system mounted")
	}
	cg := filepath.Join(roots[0], prefix+"x")
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) })

	var objs []Object
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for {
		objs = HostObjects(dir, prefix)
		child = 0
		for _, o := range objs {
			if o.Kind == "process" && strings.HasPrefix(o.Why, "sleep 61") {
				child = o.Pid
			}
		}
		if child != 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the shell starts its child
	}
	has := func(kind string, pid int, path string) bool {
		return slices.ContainsFunc(objs, func(o Object) bool { return o.Kind == kind && o.Pid == pid && o.Path == path })
	}
	for _, want := range []struct {
		kind string
		pid  int
		path string
	}{
		{"process", inherited.Process.Pid, ""}, {"process", inside.Process.Pid, ""}, {"process", parent.Process.Pid, ""},
		{"mount", 0, mp}, {"cgroup", 0, cg},
	} {
		if !has(want.kind, want.pid, want.path) {
			t.Errorf("%s %d %s not found in %v", want.kind, want.pid, want.path, objs)
		}
	}
	if child == 0 {
		t.Errorf("the shell's child not found in %v", objs)
	}
	if has("process", other.Process.Pid, "") {
		t.Errorf("process %d of another directory found", other.Process.Pid)
	}

	Remove(objs)
	deadline = time.Now().Add(10 * time.Second)
	for {
		objs = HostObjects(dir, prefix)
		if len(objs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(objs) != 0 {
		t.Errorf("left after Remove: %v", objs)
	}
}
