package podsync

import (
	"fmt"
	sysruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
)

// TestSettledHostIPs: a settled pod stays settled only with the host IPs
// it settled on, and the pods settled on the same host IPs share one copy.
func TestSettledHostIPs(t *testing.T) {
	s := &Syncer{settled: map[types.UID]settledEntry{}, epoch: time.Now()}
	pod, st := &v1.Pod{}, &runtime.PodStatus{}
	key := func(ips ...string) settledSync { return settledSync{pod: pod, runtime: st, hostIPs: ips} }
	s.settle("a", key("10.0.0.1"))
	s.settle("b", key("10.0.0.1"))
	if !s.stillSettled("a", key("10.0.0.1")) || !s.stillSettled("b", key("10.0.0.1")) {
		t.Error("pods not settled on the host IPs they settled on")
	}
	if s.stillSettled("a", key("10.0.0.2")) || s.stillSettled("a", key()) || s.stillSettled("a", key("10.0.0.1", "fd00::1")) {
		t.Error("a pod settled on other host IPs")
	}
	if s.settled["a"].hostIPs != s.settled["b"].hostIPs {
		t.Error("pods settled on the same host IPs keep a copy each")
	}
	s.settle("c", key("10.0.0.2"))
	if !s.stillSettled("c", key("10.0.0.2")) || !s.stillSettled("a", key("10.0.0.1")) {
		t.Error("pods settled on different host IPs not told apart")
	}
	s.settle("d", key())
	if !s.stillSettled("d", key()) || s.stillSettled("d", key("10.0.0.2")) {
		t.Error("a pod settled without host IPs")
	}
}

// TestSettledGivesBackRoom settles many pods at once, then unsettles them
// all (they terminated): the Syncer gives back the room its map of settled
// pods grew to, rather than hold it for as long as the agent runs.
func TestSettledGivesBackRoom(t *testing.T) {
	s := &Syncer{settled: map[types.UID]settledEntry{}, epoch: time.Now()}
	key := settledSync{pod: &v1.Pod{}, runtime: &runtime.PodStatus{}, hostIPs: []string{"10.0.0.1"}}
	churn := func(pods int) {
		for i := range pods {
			s.settle(types.UID(fmt.Sprintf("uid-%d", i)), key)
		}
		for i := range pods {
			s.unsettle(types.UID(fmt.Sprintf("uid-%d", i)))
		}
	}
	churn(10) // what the first pods make once
	before := leakcheck.LiveHeap()
	const pods = 10000
	churn(pods)
	// Some 100 bytes a pod in the map: over 1 MiB kept.
	if after := leakcheck.LiveHeap(); after > before+128<<10 {
		t.Errorf("live heap %d KiB after %d pods were settled and unsettled, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
	sysruntime.KeepAlive(s) // live while the heap is measured
}
