package gc

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// ContainerPolicy is the kubelet's container garbage collection policy.
type ContainerPolicy struct {
	// MinAge is the minimum age of a dead container before it is collected
	// (the kubelet's minimum-container-ttl-duration). Defaults to 0.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each container of a
	// pod are kept (the kubelet's maximum-dead-containers-per-container).
	// Defaults to 1 when zero (nodekit cannot tell 0 from unset; use
	// KeepNoDeadContainers for 0); negative means no limit.
	MaxPerPodContainer int
	// MaxContainers is how many dead containers are kept in total (the
	// kubelet's maximum-dead-containers). Defaults to no limit when zero;
	// negative means no limit too.
	MaxContainers int
}

// KeepNoDeadContainers, as ContainerPolicy.MaxPerPodContainer, keeps no dead
// instance of a container beyond the pod's current ones.
const KeepNoDeadContainers = -2

func (p ContainerPolicy) withDefaults() ContainerPolicy {
	switch {
	case p.MaxPerPodContainer == 0:
		p.MaxPerPodContainer = 1
	case p.MaxPerPodContainer == KeepNoDeadContainers:
		p.MaxPerPodContainer = 0
	}
	if p.MaxContainers == 0 {
		p.MaxContainers = -1
	}
	if p.MinAge < 0 {
		p.MinAge = 0
	}
	return p
}

// PodState tells the collector what may go of a pod. The pod workers
// answer it (podworker.Workers implements it): for a pod they do not know,
// both are true once they synced the known pods.
type PodState interface {
	// ShouldPodContentBeRemoved: the pod was deleted (or evicted) and has
	// terminated; all of its runtime objects and logs may go.
	ShouldPodContentBeRemoved(uid types.UID) bool
	// ShouldPodRuntimeBeRemoved: the pod has terminated; with
	// evictNonDeletedPods its dead containers and sandboxes may go too.
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// PodStateFuncs adapts two functions to a PodState.
type PodStateFuncs struct {
	ContentRemovable func(types.UID) bool
	RuntimeRemovable func(types.UID) bool
}

// ShouldPodContentBeRemoved calls ContentRemovable.
func (f PodStateFuncs) ShouldPodContentBeRemoved(uid types.UID) bool { return f.ContentRemovable(uid) }

// ShouldPodRuntimeBeRemoved calls RuntimeRemovable.
func (f PodStateFuncs) ShouldPodRuntimeBeRemoved(uid types.UID) bool { return f.RuntimeRemovable(uid) }

var _ PodState = PodStateFuncs{}

// Listing is what the runtime holds, the input of a container collection.
type Listing struct {
	Containers []*runtimeapi.Container
	Sandboxes  []*runtimeapi.PodSandbox
	// LogDirs are the names of the directories in the pod logs directory
	// (<namespace>_<name>_<uid>).
	LogDirs []string
}

// ContainerRemoval is a container to remove.
type ContainerRemoval struct {
	ID     string
	PodUID types.UID
	Name   string
	// Kill: the container is in an unknown state and may run; stop it
	// first.
	Kill bool
}

// ContainerPlan is what one collection removes, in order: containers,
// then sandboxes (each stopped first: StopPodSandbox tears down its
// network and releases its IP), then pod log directories.
type ContainerPlan struct {
	Containers []ContainerRemoval
	Sandboxes  []SandboxRemoval
	LogDirs    []string
}

// Empty reports whether the plan removes nothing.
func (p ContainerPlan) Empty() bool {
	return len(p.Containers) == 0 && len(p.Sandboxes) == 0 && len(p.LogDirs) == 0
}

// SandboxRemoval is a sandbox to stop and remove.
type SandboxRemoval struct {
	ID     string
	PodUID types.UID
}

// PlanContainers decides, as the kubelet's container garbage collector,
// what to remove from the runtime given its listing at now. It does no
// I/O.
//
//   - Dead containers (not running; created before now-MinAge) are grouped
//     by pod and container name. With allSourcesReady, every group of a
//     pod whose content may be removed (or, with evictNonDeletedPods,
//     whose runtime may be removed) goes whole. Then each group keeps its
//     MaxPerPodContainer newest; then, over MaxContainers in total, each
//     group keeps an equal share (at least one) and the oldest go.
//     Containers in an unknown state are stopped before removal.
//   - Sandboxes: a sandbox that is ready or still holds a container is
//     active and never removed. Of a pod whose content may be removed (or
//     runtime, with evictNonDeletedPods) every inactive sandbox goes; of
//     any other pod, every inactive sandbox but the newest. This removes
//     the sandboxes a runtime crash left half-made while the agent went
//     on with a new one.
//   - With allSourcesReady, the log directories of pods whose content may
//     be removed (evictNonDeletedPods does not change that).
//
// Only objects that carry a pod UID (the label io.kubernetes.pod.uid, or a
// sandbox's metadata) are considered; others are not the agent's.
func PlanContainers(now time.Time, l Listing, pods PodState, policy ContainerPolicy, allSourcesReady, evictNonDeletedPods bool) ContainerPlan {
	policy = policy.withDefaults()
	var plan ContainerPlan
	removable := func(uid types.UID) bool {
		return pods.ShouldPodContentBeRemoved(uid) || (evictNonDeletedPods && pods.ShouldPodRuntimeBeRemoved(uid))
	}
	// Answers of PodState, asked once per pod.
	verdicts := map[types.UID]bool{}
	removableOnce := func(uid types.UID) bool {
		v, ok := verdicts[uid]
		if !ok {
			v = removable(uid)
			verdicts[uid] = v
		}
		return v
	}

	// Containers.
	type unitKey struct {
		uid  types.UID
		name string
	}
	units := map[unitKey][]*runtimeapi.Container{}
	newestGC := now.Add(-policy.MinAge)
	for _, c := range l.Containers {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		uid := types.UID(c.GetLabels()[runtime.LabelPodUID])
		if uid == "" {
			continue
		}
		if time.Unix(0, c.GetCreatedAt()).After(newestGC) {
			continue
		}
		k := unitKey{uid, containerName(c)}
		units[k] = append(units[k], c)
	}
	keys := make([]unitKey, 0, len(units))
	for k, u := range units {
		slices.SortFunc(u, newestContainerFirst)
		keys = append(keys, k)
	}
	// A stable order of units makes the plan deterministic.
	slices.SortFunc(keys, func(a, b unitKey) int { return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.name, b.name)) })
	remove := func(cs []*runtimeapi.Container) {
		// Oldest first, as the kubelet.
		for i := len(cs) - 1; i >= 0; i-- {
			c := cs[i]
			plan.Containers = append(plan.Containers, ContainerRemoval{
				ID:     c.GetId(),
				PodUID: types.UID(c.GetLabels()[runtime.LabelPodUID]),
				Name:   containerName(c),
				Kill:   c.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN,
			})
		}
	}
	if allSourcesReady {
		kept := keys[:0]
		for _, k := range keys {
			if removableOnce(k.uid) {
				remove(units[k])
				delete(units, k)
				continue
			}
			kept = append(kept, k)
		}
		keys = kept
	}
	enforcePerUnit := func(limit int) {
		for _, k := range keys {
			u := units[k]
			if len(u) > limit {
				remove(u[limit:])
				units[k] = u[:limit]
			}
		}
	}
	if policy.MaxPerPodContainer >= 0 {
		enforcePerUnit(policy.MaxPerPodContainer)
	}
	if policy.MaxContainers >= 0 {
		total := 0
		for _, k := range keys {
			total += len(units[k])
		}
		if total > policy.MaxContainers && len(keys) > 0 {
			enforcePerUnit(max(policy.MaxContainers/len(keys), 1))
			var flat []*runtimeapi.Container
			for _, k := range keys {
				flat = append(flat, units[k]...)
			}
			if len(flat) > policy.MaxContainers {
				slices.SortFunc(flat, newestContainerFirst)
				remove(flat[policy.MaxContainers:])
			}
		}
	}

	// Sandboxes.
	// A sandbox holds the containers this plan does not remove (the
	// kubelet counts them all, and so removes a deleted pod's sandboxes
	// one collection later).
	going := make(map[string]bool, len(plan.Containers))
	for _, r := range plan.Containers {
		going[r.ID] = true
	}
	holding := map[string]bool{}
	for _, c := range l.Containers {
		if !going[c.GetId()] {
			holding[c.GetPodSandboxId()] = true
		}
	}
	byPod := map[types.UID][]*runtimeapi.PodSandbox{}
	for _, s := range l.Sandboxes {
		uid := sandboxUID(s)
		if uid == "" {
			continue
		}
		byPod[uid] = append(byPod[uid], s)
	}
	uids := make([]types.UID, 0, len(byPod))
	for uid := range byPod {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		sbs := byPod[uid]
		slices.SortFunc(sbs, newestSandboxFirst)
		keep := 1
		if allSourcesReady && removableOnce(uid) {
			keep = 0
		}
		for i := len(sbs) - 1; i >= keep; i-- {
			s := sbs[i]
			if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY || holding[s.GetId()] {
				continue
			}
			plan.Sandboxes = append(plan.Sandboxes, SandboxRemoval{ID: s.GetId(), PodUID: uid})
		}
	}

	// Log directories.
	if allSourcesReady {
		for _, dir := range l.LogDirs {
			uid := logDirUID(dir)
			if uid == "" || !pods.ShouldPodContentBeRemoved(uid) {
				continue
			}
			plan.LogDirs = append(plan.LogDirs, dir)
		}
	}
	return plan
}

// logDirUID is the pod UID in a pod log directory's name
// (<namespace>_<name>_<uid>), or "".
func logDirUID(dir string) types.UID {
	i := strings.LastIndexByte(dir, '_')
	if i < 0 || strings.ContainsAny(dir, `/\`) {
		return ""
	}
	return types.UID(dir[i+1:])
}

func containerName(c *runtimeapi.Container) string {
	if n := c.GetLabels()[runtime.LabelContainerName]; n != "" {
		return n
	}
	return c.GetMetadata().GetName()
}

func sandboxUID(s *runtimeapi.PodSandbox) types.UID {
	if uid := s.GetMetadata().GetUid(); uid != "" {
		return types.UID(uid)
	}
	return types.UID(s.GetLabels()[runtime.LabelPodUID])
}

func newestContainerFirst(a, b *runtimeapi.Container) int {
	return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
}

func newestSandboxFirst(a, b *runtimeapi.PodSandbox) int {
	return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
}
