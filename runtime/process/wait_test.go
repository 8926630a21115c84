package process

import (
	"os/exec"
	sysruntime "runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"
)

// TestWaitChildHoldsNoThread waits for many short-lived child processes at
// once, as the starts of a churn wait for their first monitor, and checks
// that the process made few threads for it: a goroutine blocked in a
// waitid system call holds a thread, and the Go runtime keeps every thread
// it made (and its memory) for as long as the process runs.
func TestWaitChildHoldsNoThread(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command:", err)
	}
	const children = 64
	threads := pprof.Lookup("threadcreate")
	before := threads.Count()
	var wg sync.WaitGroup
	for range children {
		cmd := exec.Command("sleep", "0.5")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := waitChild(cmd); err != nil {
				t.Error(err)
			}
			if !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 0 {
				t.Errorf("child ended with %v, want exit code 0", cmd.ProcessState)
			}
		})
	}
	wg.Wait()
	made := threads.Count() - before
	t.Logf("%d threads made while waiting for %d children", made, children)
	// A thread for each P the goroutines wake, and a few more.
	if limit := sysruntime.GOMAXPROCS(0) + 16; made > limit {
		t.Errorf("%d threads made while waiting for %d children, want at most %d", made, children, limit)
	}
}

// TestWaitChildExitedBefore waits for a child that exited before the wait
// began: the poller's edge for its pidfd comes as the pidfd is registered,
// before the wait, and the wait must not wait for another.
func TestWaitChildExitedBefore(t *testing.T) {
	if _, err := exec.LookPath("true"); err != nil {
		t.Skip("no true command:", err)
	}
	for range 20 {
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, state, err := procStat(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if state == 'Z' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the child did not exit within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		done := make(chan error, 1)
		go func() { done <- waitChild(cmd) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waitChild still waits 10 s after its child exited")
		}
	}
}
