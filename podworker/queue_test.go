package podworker

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
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
