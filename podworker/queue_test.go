package podworker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
)

func TestQueueKeepsEarliest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue()
		q.Enqueue("a", 10*time.Second)
		q.Enqueue("a", time.Minute) // a later resync must not postpone the retry
		q.Enqueue("b", time.Minute)
		q.Enqueue("b", 5*time.Second) // an earlier request moves it forward
		if got := q.GetWork(); len(got) != 0 {
			t.Fatalf("GetWork() at 0s = %v, want nothing", got)
		}
		time.Sleep(5 * time.Second)
		if diff := cmp.Diff([]types.UID{"b"}, q.GetWork()); diff != "" {
			t.Errorf("GetWork() at 5s (-want +got):\n%s", diff)
		}
		time.Sleep(5 * time.Second)
		if diff := cmp.Diff([]types.UID{"a"}, q.GetWork()); diff != "" {
			t.Errorf("GetWork() at 10s (-want +got):\n%s", diff)
		}
		time.Sleep(time.Hour)
		if got := q.GetWork(); len(got) != 0 {
			t.Errorf("GetWork() after both were taken = %v, want nothing", got)
		}
	})
}

// TestQueueMatchesModel drives the queue and a plain map with the same
// random enqueues and polls under a fake clock: the heap must return
// exactly what a walk over every pod returns.
func TestQueueMatchesModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		q := NewQueue()
		model := map[types.UID]time.Time{}
		uids := make([]types.UID, 200)
		for i := range uids {
			uids[i] = types.UID(fmt.Sprintf("pod-%03d", i))
		}
		for step := range 5000 {
			switch rng.IntN(4) {
			case 3:
				uid := uids[rng.IntN(len(uids))]
				q.remove(uid)
				delete(model, uid)
			case 0, 1:
				uid := uids[rng.IntN(len(uids))]
				delay := time.Duration(rng.IntN(120)-10) * time.Second
				q.Enqueue(uid, delay)
				at := time.Now().Add(delay)
				if cur, ok := model[uid]; !ok || at.Before(cur) {
					model[uid] = at
				}
			case 2:
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
				var want []types.UID
				for uid, at := range model {
					if !at.After(time.Now()) {
						want = append(want, uid)
						delete(model, uid)
					}
				}
				slices.Sort(want)
				if diff := cmp.Diff(want, q.GetWork(), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("step %d: GetWork() (-want +got):\n%s", step, diff)
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("step %d: Len() = %d, want %d", step, q.Len(), len(model))
			}
		}
	})
}

func TestQueueZeroValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q Queue
		if got := q.GetWork(); len(got) != 0 {
			t.Fatalf("GetWork() on an empty queue = %v, want nothing", got)
		}
		q.Enqueue("b", time.Second)
		q.Enqueue("a", 0)
		q.Enqueue("c", -time.Second) // already overdue
		if diff := cmp.Diff([]types.UID{"a", "c"}, q.GetWork()); diff != "" {
			t.Errorf("GetWork() at 0s (-want +got):\n%s", diff)
		}
		time.Sleep(time.Second)
		if diff := cmp.Diff([]types.UID{"b"}, q.GetWork()); diff != "" {
			t.Errorf("GetWork() at 1s (-want +got):\n%s", diff)
		}
		if q.Len() != 0 {
			t.Errorf("Len() after every pod was taken = %d, want 0", q.Len())
		}
		// The queue is usable again once emptied.
		q.Enqueue("a", time.Second)
		time.Sleep(time.Second)
		if diff := cmp.Diff([]types.UID{"a"}, q.GetWork()); diff != "" {
			t.Errorf("GetWork() after reuse (-want +got):\n%s", diff)
		}
	})
}

func TestQueueConcurrent(t *testing.T) {
	q := NewQueue()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				q.Enqueue(types.UID(fmt.Sprintf("%d-%d", g, i%50)), 0)
				q.GetWork()
			}
		})
	}
	wg.Wait()
	q.GetWork()
	if q.Len() != 0 {
		t.Errorf("Len() after draining = %d, want 0", q.Len())
	}
}

// BenchmarkQueueGetWork measures the sync loop's poll with n pods in the
// queue: with nothing due, and with a few pods due each poll (moved
// forward, taken, and put back for the next resync, as the workers do).
// Both must be flat in n.
func BenchmarkQueueGetWork(b *testing.B) {
	for _, n := range []int{110, 1000, 10000} {
		for _, due := range []int{0, 3} {
			b.Run(fmt.Sprintf("pods=%d/due=%d", n, due), func(b *testing.B) {
				q := NewQueue()
				uids := make([]types.UID, n)
				for i := range uids {
					uids[i] = types.UID(fmt.Sprintf("%08d-0000-0000-0000-000000000000", i))
					q.Enqueue(uids[i], time.Hour+time.Duration(i)*time.Millisecond)
				}
				next := 0
				b.ReportAllocs()
				for b.Loop() {
					for range due {
						q.Enqueue(uids[next], 0)
						next = (next + 1) % n
					}
					got := q.GetWork()
					if len(got) != due {
						b.Fatalf("GetWork() returned %d pods, want %d", len(got), due)
					}
					for _, uid := range got {
						q.Enqueue(uid, time.Hour)
					}
				}
			})
		}
	}
}

// TestQueueWake: a pod queued with Wake signals Woken when it is due, to
// the fake clock's instant, each pod at its own time, the earliest asked
// for; its worker then learns that the wake-up fired, once.
func TestQueueWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue()
		start := time.Now()
		q.Wake("b", 3200*time.Millisecond)
		q.Wake("a", 5*time.Second)
		q.Wake("a", 1500*time.Millisecond) // earlier: kept
		q.Wake("b", 4*time.Second)         // later: ignored
		q.Enqueue("c", time.Second)        // no wake-up
		woken := q.Woken()
		var at []time.Duration
		var work [][]types.UID
		for range 2 {
			<-woken
			at = append(at, time.Since(start))
			work = append(work, q.GetWork())
		}
		if want := []time.Duration{1500 * time.Millisecond, 3200 * time.Millisecond}; !slices.Equal(at, want) {
			t.Errorf("woken at %v, want %v", at, want)
		}
		if want := [][]types.UID{{"a", "c"}, {"b"}}; !cmp.Equal(work, want) {
			t.Errorf("work %v, want %v", work, want)
		}
		if !q.takeFired("a") || q.takeFired("a") || !q.takeFired("b") || q.takeFired("c") {
			t.Error("takeFired: want true once for a and b, never for c")
		}
		time.Sleep(time.Minute)
		select {
		case <-woken:
			t.Error("woken again with no wake-up left")
		default:
		}

		// A worker gone: its wake-up goes too.
		q.Wake("d", time.Second)
		q.remove("d")
		time.Sleep(2 * time.Second)
		if q.takeFired("d") {
			t.Error("a forgotten pod's wake-up fired")
		}
	})
}

// NextDue is the earliest pod's due time; Earlier signals when a pod
// becomes the earliest, and only then.
func TestQueueNextDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue()
		earlier := q.Earlier()
		signalled := func() bool {
			select {
			case <-earlier:
				return true
			default:
				return false
			}
		}
		if _, ok := q.NextDue(); ok || signalled() {
			t.Fatal("an empty queue has a due pod")
		}
		start := time.Now()
		q.Enqueue("a", time.Minute)
		if at, ok := q.NextDue(); !ok || at.Sub(start) != time.Minute || !signalled() {
			t.Errorf("NextDue() = %v, %v after a's enqueue; want 1m, signalled", at.Sub(start), ok)
		}
		q.Enqueue("b", 2*time.Minute)
		if at, _ := q.NextDue(); at.Sub(start) != time.Minute || signalled() {
			t.Errorf("NextDue() = %v after a later pod, want 1m, not signalled", at.Sub(start))
		}
		q.Enqueue("b", 10*time.Second)
		if at, _ := q.NextDue(); at.Sub(start) != 10*time.Second || !signalled() {
			t.Errorf("NextDue() = %v after b moved first, want 10s, signalled", at.Sub(start))
		}
		time.Sleep(10 * time.Second)
		if got := q.GetWork(); !cmp.Equal(got, []types.UID{"b"}) {
			t.Errorf("GetWork() = %v, want b", got)
		}
		if at, _ := q.NextDue(); at.Sub(start) != time.Minute {
			t.Errorf("NextDue() = %v after b was taken, want 1m", at.Sub(start))
		}
	})
}
