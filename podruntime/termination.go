package podruntime

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podmodel"
)

// terminationOrdering makes a pod with restartable init containers
// (sidecars) stop in the kubelet's order: app containers first, all at
// once; then each sidecar once every app container and every sidecar
// declared after it have stopped, so sidecars stop in reverse order. A
// container waits at most its grace period for its turn.
type terminationOrdering struct {
	mu sync.Mutex
	// terminated is closed once the named container stopped.
	terminated map[string]chan struct{}
	// prereqs are what the named container waits for.
	prereqs map[string][]chan struct{}
}

// newTerminationOrdering builds the ordering of pod for the containers
// being stopped (running): the others are not waited for.
func newTerminationOrdering(pod *v1.Pod, running []string) *terminationOrdering {
	o := &terminationOrdering{terminated: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, n := range running {
		isRunning[n] = true
	}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch)
		}
		o.terminated[name] = ch
		return ch
	}
	var apps []chan struct{}
	for i := range pod.Spec.Containers {
		apps = append(apps, channel(pod.Spec.Containers[i].Name))
	}
	var later chan struct{}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !podmodel.IsRestartableInit(c) {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], apps...)
		if later != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], later)
		}
		later = ch
	}
	return o
}

// waitForTurn blocks until the containers that stop before name have
// stopped, at most grace seconds (or until ctx ends), and returns the
// whole seconds it waited.
func (o *terminationOrdering) waitForTurn(ctx context.Context, clk clock.Clock, name string, grace int64) int64 {
	prereqs := o.prereqs[name]
	if len(prereqs) == 0 {
		return 0
	}
	start := clk.Now()
	timer := clk.NewTimer(time.Duration(grace) * time.Second)
	defer timer.Stop()
	for _, ch := range prereqs {
		select {
		case <-ch:
		case <-timer.C():
			return int64(clk.Since(start) / time.Second)
		case <-ctx.Done():
			return int64(clk.Since(start) / time.Second)
		}
	}
	return int64(clk.Since(start) / time.Second)
}

// containerTerminated records that the named container stopped.
func (o *terminationOrdering) containerTerminated(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.terminated[name]; ok {
		close(ch)
		delete(o.terminated, name)
	}
}

// hasRestartableInit reports whether the pod has a sidecar.
func hasRestartableInit(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if podmodel.IsRestartableInit(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}
