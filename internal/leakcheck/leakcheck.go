// Package leakcheck finds goroutines that tests leave running, as goleak
// does, with a longer wait. goleak v1.3.0 retries for about 0.43s before it
// reports a goroutine, and its retry budget cannot be set from outside the
// package: on a loaded machine a goroutine that is already on its way out
// (a stopped timer's, a closed connection's) can take longer than that to
// end. Find retries goleak.Find until none is left or Timeout has passed;
// a real leak is still reported, only later. LiveHeap is the heap the
// tests of parts' kept room compare; Goroutines counts the goroutines
// that run a part's code, for the tests of what an idle part holds.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Timeout is how long Find waits for goroutines to end.
const Timeout = 10 * time.Second

// Find returns goleak.Find's error once goroutines (other than those the
// options ignore) have been left running for Timeout, or nil as soon as
// none is.
func Find(opts ...goleak.Option) error {
	deadline := time.Now().Add(Timeout)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// VerifyNone fails t if Find finds goroutines left.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain runs the tests of m and, if they passed, fails the run if
// Find finds goroutines left. It is goleak.VerifyTestMain with Find's wait.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LiveHeap returns the bytes of live heap objects, after a collection: a
// test that churns a part compares it before and after, to find room the
// part kept for what is gone (a map keeps the room it grew to).
func LiveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Goroutines counts the goroutines with a frame whose function name
// contains frame (a package's "github.com/nodekit/nodekit/node.", a
// type's "userns.(*Manager)") in their stacks.
func Goroutines(frame string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, frame) {
			count++
		}
	}
	return count
}
