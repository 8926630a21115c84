package podsync

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// podCgroupResizer is the cgroup.PodManager as a resize in place sees the
// pod's cgroup (podruntime.PodCgroup).
type podCgroupResizer interface {
	DesiredPodConfig(pod *v1.Pod) *cgroup.ResourceConfig
	PodConfig(pod *v1.Pod) (*cgroup.ResourceConfig, uint64, error)
	SetPodConfig(pod *v1.Pod, rc *cgroup.ResourceConfig) error
}

// podCgroupFor returns the pod cgroup a resize changes, nil when cgroups
// are off or the PodCgroups cannot resize.
func podCgroupFor(c PodCgroups) podruntime.PodCgroup {
	if !c.Enabled() {
		return nil
	}
	r, ok := c.(podCgroupResizer)
	if !ok {
		return nil
	}
	return podCgroup{r}
}

type podCgroup struct{ r podCgroupResizer }

func toRuntimeConfig(rc *cgroup.ResourceConfig) runtime.PodCgroupConfig {
	if rc == nil {
		return runtime.PodCgroupConfig{}
	}
	return runtime.PodCgroupConfig{CPUShares: rc.CPUShares, CPUQuota: rc.CPUQuota, CPUPeriod: rc.CPUPeriod, Memory: rc.Memory}
}

func (p podCgroup) Current(pod *v1.Pod) (runtime.PodCgroupConfig, uint64, error) {
	rc, usage, err := p.r.PodConfig(pod)
	return toRuntimeConfig(rc), usage, err
}

func (p podCgroup) Desired(pod *v1.Pod) runtime.PodCgroupConfig {
	return toRuntimeConfig(p.r.DesiredPodConfig(pod))
}

func (p podCgroup) Set(pod *v1.Pod, cfg runtime.PodCgroupConfig) error {
	return p.r.SetPodConfig(pod, &cgroup.ResourceConfig{CPUShares: cfg.CPUShares, CPUQuota: cfg.CPUQuota, CPUPeriod: cfg.CPUPeriod, Memory: cfg.Memory})
}

// PodCgroupState reads the pod cgroup of a pod with pod-level resources
// (spec.resources, as allocated): its cpu and memory and those its
// allocation gives it. Nil for a pod without pod-level resources, when
// cgroups are off, or when the cgroup cannot be read (not created yet,
// removed).
func PodCgroupState(c PodCgroups, pod *v1.Pod) *status.PodCgroupState {
	if !podmodel.HasPodLevelResources(pod) {
		return nil
	}
	pc := podCgroupFor(c)
	if pc == nil {
		return nil
	}
	cur, _, err := pc.Current(pod)
	if err != nil {
		return nil
	}
	return &status.PodCgroupState{Current: cur, Desired: pc.Desired(pod)}
}
