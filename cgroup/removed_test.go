package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// goneFS is the host's file system, but for one cgroup that the kernel
// removed while it was read: its cgroup.procs answers ENODEV.
type goneFS struct {
	realFS
	gone string
}

func (f goneFS) readFile(path string) ([]byte, error) {
	if path == filepath.Join(f.gone, "cgroup.procs") {
		return nil, &os.PathError{Op: "read", Path: path, Err: syscall.ENODEV}
	}
	return f.realFS.readFile(path)
}

// A cgroup removed while Pids walks its parent (a container's, as the
// container ends) has no processes left: Pids lists the others rather
// than fail, and so does the Destroy of the parent that calls it.
func TestPidsCgroupRemovedWhileRead(t *testing.T) {
	root := t.TempDir()
	pod := filepath.Join(root, "pod")
	for _, d := range []string{pod, filepath.Join(pod, "ctr1"), filepath.Join(pod, "ctr2")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dir, procs := range map[string]string{pod: "", filepath.Join(pod, "ctr1"): "101\n", filepath.Join(pod, "ctr2"): "102\n"} {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &fsManager{fs: goneFS{gone: filepath.Join(pod, "ctr2")}, locs: []location{{mountpoint: root, controller: "cgroup2", v2: true}}}
	pids, err := m.Pids("/pod")
	if err != nil || !slices.Equal(pids, []int{101}) {
		t.Errorf("Pids = %v, %v; want [101] and no error (ctr2 went while read)", pids, err)
	}
}
