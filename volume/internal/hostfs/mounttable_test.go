package hostfs

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMountTableShares checks that the callers who ask while a read is
// under way share one read, and that none is given a read that started
// before it asked.
func TestMountTableShares(t *testing.T) {
	var reads atomic.Int64
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	tab := &MountTable{read: func() ([]MountInfo, error) {
		n := reads.Add(1)
		started <- struct{}{}
		<-release
		return []MountInfo{{MountPoint: "/m", Source: strconv.FormatInt(n, 10)}}, nil
	}}
	// A first caller starts read 1 and blocks in it.
	first := make(chan int, 1)
	go func() {
		m, _ := tab.Mounts()
		first <- id(m)
	}()
	<-started
	// 100 callers ask while read 1 is under way: they must not be given
	// read 1, and share read 2.
	const n = 100
	var wg sync.WaitGroup
	got := make([]int, n)
	for i := range n {
		wg.Go(func() {
			m, err := tab.Mounts()
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = id(m)
		})
	}
	// Wait until every one of them waits for the pending read.
	for tab.waiting() < n {
		runtime.Gosched()
	}
	close(release) // read 1 ends; read 2 (and a third at most) run through
	wg.Wait()
	if id := <-first; id != 1 {
		t.Errorf("first caller got read %d, want 1", id)
	}
	for i, id := range got {
		if id < 2 {
			t.Fatalf("caller %d got read %d, which started before it asked", i, id)
		}
	}
	if r := reads.Load(); r != 2 {
		t.Errorf("%d reads for 101 callers, want 2", r)
	}
	// The table is read again for a later caller.
	if m, _ := tab.Mounts(); id(m) != 3 {
		t.Errorf("a later caller got read %d, want a new one (3)", id(m))
	}
}

// TestMountTableNil checks that a nil MountTable reads the mount table.
func TestMountTableNil(t *testing.T) {
	var tab *MountTable
	if _, err := tab.Mounts(); err != nil && err != ErrUnsupported {
		t.Fatal(err)
	}
}

// waiting is how many callers wait for the pending read.
func (t *MountTable) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		return 0
	}
	return t.pending.callers
}

// id is the number of the read that gave m.
func id(m []MountInfo) int {
	n, _ := strconv.Atoi(m[0].Source)
	return n
}
