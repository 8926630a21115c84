package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"sync"
)

// MountTable reads the mount table (Mounts) for concurrent callers, one
// read for all those that ask while a read is pending: a pod's release
// reads it to check that nothing is mounted below the pod's directory, and
// the pods of a churn, released a few hundred a second, each read all of
// /proc/self/mountinfo, which on a node lists every container's mounts.
//
// A caller is never given a table read before it asked: it waits for a
// read that starts after its call, so it sees every mount made before it
// asked, as with Mounts. The zero MountTable is ready to use; a nil
// *MountTable reads the table for each call. A MountTable is safe for
// concurrent use and must not be copied once used.
type MountTable struct {
	mu sync.Mutex
	// pending is the read the next callers share, not started yet; nil
	// when nobody waits.
	pending *mountRead
	// reading: a caller is reading the table for the others (lead).
	reading bool
	// read, when set, replaces Mounts (tests).
	read func() ([]MountInfo, error)
}

type mountRead struct {
	done    chan struct{}
	callers int // those sharing it, for tests; guarded by MountTable.mu
	mounts  []MountInfo
	err     error
}

// Mounts returns the mount table, read after the call began. The slice is
// shared with other callers: it must not be modified.
func (t *MountTable) Mounts() ([]MountInfo, error) {
	if t == nil {
		return Mounts()
	}
	t.mu.Lock()
	r := t.pending
	if r == nil {
		r = &mountRead{done: make(chan struct{})}
		t.pending = r
	}
	r.callers++
	leader := !t.reading
	t.reading = true
	t.mu.Unlock()
	if leader {
		t.lead()
	}
	<-r.done
	return r.mounts, r.err
}

// lead reads the table for the pending callers until none is left: each
// read serves the callers that asked before it started.
func (t *MountTable) lead() {
	read := t.read
	if read == nil {
		read = Mounts
	}
	for {
		t.mu.Lock()
		r := t.pending
		t.pending = nil
		if r == nil {
			t.reading = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		r.mounts, r.err = read()
		close(r.done)
	}
}

// RemoveAllUnmounted is the package's RemoveAllUnmounted with the mount
// table read through t, and the removal made by removeAll (os.RemoveAll
// when nil) given the resolved path.
func (t *MountTable) RemoveAllUnmounted(dir string, removeAll func(string) error) error {
	phys, under, err := t.mountsUnder(dir)
	if err != nil || phys == "" {
		return err
	}
	if len(under) > 0 {
		return &fs.PathError{Op: "remove", Path: under[0].MountPoint, Err: ErrMounted}
	}
	if removeAll == nil {
		removeAll = os.RemoveAll
	}
	return removeAll(phys)
}

// UnmountAll is the package's UnmountAll with the mount table read through
// t.
func (t *MountTable) UnmountAll(dir string) error {
	_, under, err := t.mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, m := range under {
		if err := Unmount(m.MountPoint); err != nil {
			return err
		}
	}
	return nil
}

// mountsUnder resolves dir and returns its physical path and the mounts
// at or below it, read through t; phys is "" when dir does not exist.
func (t *MountTable) mountsUnder(dir string) (phys string, under []MountInfo, err error) {
	if phys, err = Resolve(dir); err != nil {
		return "", nil, err
	}
	if _, err := os.Lstat(phys); errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	mounts, err := t.Mounts()
	if err != nil {
		return "", nil, err
	}
	return phys, Under(mounts, phys), nil
}
