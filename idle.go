package nodekit

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/logrotate"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// cachedContainers answers a list of the running containers from the
// cache of the agent's own PLEG while that cache is current, and asks the
// runtime otherwise (or for any other list). The log rotator lists the
// running containers every 10 s; at a thousand pods that list, over CRI,
// costs more than the rest of the rotator's pass (a stat of each log).
// Everything else goes to the runtime.
type cachedContainers struct {
	runtime.RuntimeService
	cache *pleg.StatusCache
	// logPath is the log path the agent's runtime manager gave a
	// container; nil when not known.
	logPath func(*runtime.PodStatus, *runtime.ContainerStatus) string
}

var _ logrotate.LogPathLister = cachedContainers{}

// RunningLogPaths implements logrotate.LogPathLister: the log paths of the
// running containers the cache holds, while it is current, so that the
// rotator's first pass over new containers reads none of their statuses.
func (c cachedContainers) RunningLogPaths() (map[string]string, bool) {
	if c.logPath == nil {
		return nil, false
	}
	paths := map[string]string{}
	ok := c.cache.EachRunningContainer(time.Now().Add(-cacheMaxAge), func(pod *runtime.PodStatus, cs *runtime.ContainerStatus) {
		if pod.ID != "" && pod.Name != "" && pod.Namespace != "" && cs.Name != "" {
			paths[cs.ID] = c.logPath(pod, cs)
		}
	})
	return paths, ok
}

func (c cachedContainers) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if onlyRunning(filter) {
		if cs, ok := c.cache.RunningContainers(time.Now().Add(-cacheMaxAge)); ok {
			return cs, nil
		}
	}
	return c.RuntimeService.ListContainers(ctx, filter)
}

// Unwrap returns the runtime, whose optional capabilities (reopening a
// container's log) the wrapper hides.
func (c cachedContainers) Unwrap() runtime.RuntimeService { return c.RuntimeService }

// onlyRunning reports whether filter asks for every running container and
// nothing else.
func onlyRunning(f *runtimeapi.ContainerFilter) bool {
	return f != nil && f.GetState().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING && f.State != nil &&
		f.GetId() == "" && f.GetPodSandboxId() == "" && len(f.GetLabelSelector()) == 0
}

// logRotationRuntime is the runtime the log rotator reads: the running
// containers come from the PLEG's cache when the PLEG is one of package
// pleg (another may keep only some pods there).
func (a *Agent) logRotationRuntime() runtime.RuntimeService {
	sc, ok := a.cache.(*pleg.StatusCache)
	if !ok || !a.plegKeepsCache() {
		return a.opts.Runtime
	}
	return cachedContainers{RuntimeService: a.opts.Runtime, cache: sc, logPath: a.runtime.ContainerLogPath}
}

// plegKeepsCache reports whether the agent's PLEG is one of package pleg,
// which keeps every pod of the runtime in the cache it is given. Built on
// another cache, it never refreshes the agent's, which then never counts
// as current: readers of the cache fall back to the runtime.
func (a *Agent) plegKeepsCache() bool {
	switch a.events.(type) {
	case *pleg.Generic, *pleg.Evented:
		return true
	}
	return false
}
