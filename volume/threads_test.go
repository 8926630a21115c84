package volume_test

import (
	"context"
	"fmt"
	sysruntime "runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestManagerThreadsUnderChurn starts and releases the directories of
// many pods at once, as the pod workers of a churn do, and checks that
// the process made few threads for it: a goroutine blocked in a system
// call holds a thread, the Go runtime keeps every thread it made (and its
// memory) for as long as the process runs, and the pods' directories,
// made and removed in one parent directory, serialize in the kernel
// anyway.
func TestManagerThreadsUnderChurn(t *testing.T) {
	e := newEnv(t, nil)
	threads := pprof.Lookup("threadcreate")
	start := time.Now()
	before := threads.Count()
	const pods = 2000
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "default", UID: types.UID(fmt.Sprint("u", i))}}
			if _, err := e.m.WaitForPodVolumes(context.Background(), pod); err != nil {
				t.Error(err)
				return
			}
			if err := e.m.ReleasePod(context.Background(), pod.UID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	made := threads.Count() - before
	t.Logf("%d threads made for %d pods in %s", made, pods, time.Since(start))
	// A thread for each P the goroutines wake, and a few more.
	if limit := sysruntime.GOMAXPROCS(0) + 16; made > limit {
		t.Errorf("%d threads made for %d pods' directories, want at most %d", made, pods, limit)
	}
}
