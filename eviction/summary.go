package eviction

import (
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// PodStatsFromSummary reads the pods' usage from a summary (the stats
// package's, shared with the node API's /stats/summary): each pod's memory
// working set, process count, ephemeral storage (bytes and inodes), the
// volumes it reports by name, and each container's working set and
// ephemeral storage: its logs, plus its writable layer unless
// dedicatedImageFs (the kubelet's containerEphemeralStorageLimitEviction).
// A figure the summary lacks stays unknown.
func PodStatsFromSummary(s *statsapi.Summary, dedicatedImageFs bool) map[types.UID]PodStats {
	out := make(map[types.UID]PodStats, len(s.Pods))
	for i := range s.Pods {
		sp := &s.Pods[i]
		var ps PodStats
		if m := sp.Memory; m != nil && m.WorkingSetBytes != nil {
			ps.MemoryWorkingSet = u64(*m.WorkingSetBytes)
		}
		if pr := sp.ProcessStats; pr != nil && pr.ProcessCount != nil {
			ps.Processes = u64(*pr.ProcessCount)
		}
		if e := sp.EphemeralStorage; e != nil && e.UsedBytes != nil {
			ps.EphemeralStorage = u64(*e.UsedBytes)
			if e.InodesUsed != nil {
				ps.Inodes = u64(*e.InodesUsed)
			}
		}
		for _, v := range sp.VolumeStats {
			if v.UsedBytes == nil {
				continue
			}
			if ps.Volumes == nil {
				ps.Volumes = map[string]uint64{}
			}
			ps.Volumes[v.Name] = *v.UsedBytes
		}
		for _, c := range sp.Containers {
			var cs ContainerStats
			if m := c.Memory; m != nil && m.WorkingSetBytes != nil {
				cs.MemoryWorkingSet = u64(*m.WorkingSetBytes)
			}
			var used uint64
			known := false
			if l := c.Logs; l != nil && l.UsedBytes != nil {
				used, known = used+*l.UsedBytes, true
			}
			if r := c.Rootfs; !dedicatedImageFs && r != nil && r.UsedBytes != nil {
				used, known = used+*r.UsedBytes, true
			}
			if known {
				cs.EphemeralStorage = u64(used)
			}
			if ps.Containers == nil {
				ps.Containers = map[string]ContainerStats{}
			}
			ps.Containers[c.Name] = cs
		}
		out[types.UID(sp.PodRef.UID)] = ps
	}
	return out
}

func u64(v uint64) *uint64 { return &v }
