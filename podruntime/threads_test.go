package podruntime_test

import (
	"fmt"
	sysruntime "runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestThreadsUnderChurn starts and removes many pods at once, as the pod
// workers and housekeeping of a churn do, and checks that the process
// made few threads for their files (log directories, /etc/hosts,
// termination-log files): a goroutine blocked in a system call holds a
// thread, and the Go runtime keeps every thread it made (and its memory)
// for as long as the process runs.
func TestThreadsUnderChurn(t *testing.T) {
	f := newSpecFixture(t)
	threads := pprof.Lookup("threadcreate")
	start := time.Now()
	before := threads.Count()
	const pods = 1000
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			pod := specPod(v1.Container{TerminationMessagePath: "/dev/termination-log"})
			pod.Name, pod.UID = fmt.Sprint("p", i), types.UID(fmt.Sprint("u", i))
			pod.Spec.HostNetwork = true // an /etc/hosts file of the node's
			st, err := f.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Error(err)
				return
			}
			if err := f.m.SyncPod(t.Context(), pod, st).Err(); err != nil {
				t.Error(err)
				return
			}
			if err := f.m.RemovePod(t.Context(), pod.UID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	made := threads.Count() - before
	t.Logf("%d threads made for %d pods in %s", made, pods, time.Since(start))
	// A thread for each P the goroutines wake, and a few more.
	if limit := sysruntime.GOMAXPROCS(0) + 16; made > limit {
		t.Errorf("%d threads made for %d pods' files, want at most %d", made, pods, limit)
	}
}
