package upkeep

import (
	"context"
	"os"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/gc"
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
	// container, in the pod's log directory podLogDir; nil when not
	// known.
	logPath   func(*runtime.PodStatus, *runtime.ContainerStatus) string
	podLogDir func(*runtime.PodStatus) string
}

var (
	_ logrotate.LogPathLister = cachedContainers{}
	_ logrotate.ChangeCounter = cachedContainers{}
	_ gc.CachedLister         = cachedContainers{}
)

// CachedListing implements gc.CachedLister: the pods of the cache with
// something dead, while the cache is current, so that the container
// collector decodes no listing of every container and sandbox.
func (c cachedContainers) CachedListing() ([]*runtimeapi.Container, []*runtimeapi.PodSandbox, bool) {
	return c.cache.NotRunning(time.Now().Add(-pleg.CacheMaxAge))
}

// RunningContainersChanges implements logrotate.ChangeCounter: the count
// of the cache's changes, while the cache is current (ListContainers then
// answers from it), so that the rotator does not list ten thousand
// unchanged containers every pass.
func (c cachedContainers) RunningContainersChanges() (uint64, bool) {
	return c.cache.Changes(time.Now().Add(-pleg.CacheMaxAge))
}

// RunningLogPaths implements logrotate.LogPathLister: the log paths of the
// running containers the cache holds, so that the rotator's first pass
// over new containers reads none of their statuses. The cache need not be
// current: a container's log path is fixed when it is created, and the
// rotator asks only for the containers its list of running ones found (a
// start of 10,000 pods keeps the relisting PLEG's cache behind for a
// while, and the rotator's passes meanwhile read the paths here rather
// than one container status each).
// A path is listed only when its pod's log directory is there (the agent
// makes it before the pod's sandbox): a container created while the agent
// put logs elsewhere (another PodLogsDir) has its status read.
func (c cachedContainers) RunningLogPaths() (map[string]string, bool) {
	if c.logPath == nil || c.podLogDir == nil {
		return nil, false
	}
	paths := map[string]string{}
	var dirs []string
	ok := c.cache.EachRunningContainer(time.Time{}, func(pod *runtime.PodStatus, cs *runtime.ContainerStatus) {
		if pod.ID != "" && pod.Name != "" && pod.Namespace != "" && cs.Name != "" {
			paths[cs.ID] = c.logPath(pod, cs)
			dirs = append(dirs, c.podLogDir(pod))
		}
	})
	if !ok {
		return nil, false
	}
	// The directories are checked outside the cache's lock.
	present := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		if _, seen := present[d]; !seen {
			fi, err := os.Stat(d)
			present[d] = err == nil && fi.IsDir()
		}
	}
	for id, p := range paths {
		if !present[filepath.Dir(filepath.Dir(p))] {
			delete(paths, id)
		}
	}
	return paths, true
}

func (c cachedContainers) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if onlyRunning(filter) {
		if cs, ok := c.cache.RunningContainers(time.Now().Add(-pleg.CacheMaxAge)); ok {
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

// gcRuntime is the runtime the container collector reads: its listings
// come from the PLEG's cache when the PLEG keeps every pod of the runtime
// there (Parts.Cache).
func (m *Manager) gcRuntime() gc.Runtime {
	if m.p.Cache == nil {
		return m.p.Runtime
	}
	return cachedContainers{RuntimeService: m.p.Runtime, cache: m.p.Cache}
}

// logRotationRuntime is the runtime the log rotator reads: the running
// containers come from the PLEG's cache when the PLEG keeps every pod of
// the runtime there (Parts.Cache).
func (m *Manager) logRotationRuntime() runtime.RuntimeService {
	if m.p.Cache == nil {
		return m.p.Runtime
	}
	return cachedContainers{RuntimeService: m.p.Runtime, cache: m.p.Cache, logPath: m.p.PodRuntime.ContainerLogPath, podLogDir: m.p.PodRuntime.PodLogDir}
}
