package cgroup_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podmodel"
)

// rl builds a ResourceList from "cpu", "500m", "memory", "64Mi", ...
func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Image: "busybox", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func sidecar(name string, req, lim v1.ResourceList) v1.Container {
	c := ctr(name, req, lim)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func podOf(uid string, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaOf(uid),
		Spec:       v1.PodSpec{Containers: containers},
	}
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

const mi = 1 << 20

func TestResourceConfigForPod(t *testing.T) {
	withInit := func(p *v1.Pod, init ...v1.Container) *v1.Pod { p.Spec.InitContainers = init; return p }
	withPodLevel := func(p *v1.Pod, req, lim v1.ResourceList) *v1.Pod {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	withOverhead := func(p *v1.Pod, o v1.ResourceList) *v1.Pod { p.Spec.Overhead = o; return p }
	withStatusQOS := func(p *v1.Pod, q v1.PodQOSClass) *v1.Pod { p.Status.QOSClass = q; return p }

	guaranteed := rl("cpu", "1", "memory", "64Mi")
	tests := []struct {
		name        string
		pod         *v1.Pod
		noCPULimits bool
		wantQOS     v1.PodQOSClass
		want        *cgroup.ResourceConfig
	}{{
		name:    "besteffort gets the minimum shares and nothing else",
		pod:     podOf("be", ctr("a", nil, nil), ctr("b", nil, nil)),
		wantQOS: v1.PodQOSBestEffort,
		want:    &cgroup.ResourceConfig{CPUShares: u64(2)},
	}, {
		name:    "guaranteed: shares, quota, period and memory from the sums",
		pod:     podOf("g", ctr("a", guaranteed, guaranteed), ctr("b", rl("cpu", "500m", "memory", "16Mi"), rl("cpu", "500m", "memory", "16Mi"))),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(1536), CPUQuota: i64(150000), CPUPeriod: u64(100000), Memory: i64(80 * mi)},
	}, {
		name:    "guaranteed with a tiny cpu limit gets the minimum quota of 1ms",
		pod:     podOf("g", ctr("a", rl("cpu", "5m", "memory", "8Mi"), rl("cpu", "5m", "memory", "8Mi"))),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(5), CPUQuota: i64(1000), CPUPeriod: u64(100000), Memory: i64(8 * mi)},
	}, {
		name:    "guaranteed with 1m cpu keeps the minimum shares of 2",
		pod:     podOf("g", ctr("a", rl("cpu", "1m", "memory", "8Mi"), rl("cpu", "1m", "memory", "8Mi"))),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(2), CPUQuota: i64(1000), CPUPeriod: u64(100000), Memory: i64(8 * mi)},
	}, {
		name:        "guaranteed without cpu limit enforcement has quota -1",
		pod:         podOf("g", ctr("a", guaranteed, guaranteed)),
		noCPULimits: true,
		wantQOS:     v1.PodQOSGuaranteed,
		want:        &cgroup.ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(-1), CPUPeriod: u64(100000), Memory: i64(64 * mi)},
	}, {
		name:    "shares are capped at 262144",
		pod:     podOf("g", ctr("a", rl("cpu", "300", "memory", "1Gi"), rl("cpu", "300", "memory", "1Gi"))),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(262144), CPUQuota: i64(30000000), CPUPeriod: u64(100000), Memory: i64(1024 * mi)},
	}, {
		name:    "burstable with requests only: shares",
		pod:     podOf("b", ctr("a", rl("cpu", "250m", "memory", "32Mi"), nil)),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(256)},
	}, {
		name: "burstable where every container limits cpu and memory: quota and memory",
		pod: podOf("b",
			ctr("a", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "1", "memory", "64Mi")),
			ctr("b", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "500m", "memory", "64Mi"))),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(512), CPUQuota: i64(150000), CPUPeriod: u64(100000), Memory: i64(128 * mi)},
	}, {
		name: "burstable where one container has no cpu limit: memory but no quota",
		pod: podOf("b",
			ctr("a", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "1", "memory", "64Mi")),
			ctr("b", rl("cpu", "250m", "memory", "32Mi"), rl("memory", "64Mi"))),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(512), Memory: i64(128 * mi)},
	}, {
		name: "burstable where one container has no memory limit: quota but no memory",
		pod: podOf("b",
			ctr("a", rl("cpu", "250m"), rl("cpu", "1", "memory", "64Mi")),
			ctr("b", rl("cpu", "250m"), rl("cpu", "1"))),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(512), CPUQuota: i64(200000), CPUPeriod: u64(100000)},
	}, {
		name: "burstable: an init container without limits drops quota and memory",
		pod: withInit(podOf("b",
			ctr("a", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "1", "memory", "64Mi"))),
			ctr("init", nil, nil)),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(256)},
	}, {
		name: "init container larger than the app containers sets the requests and limits",
		pod: withInit(podOf("b",
			ctr("a", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "500m", "memory", "64Mi")),
			ctr("b", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "500m", "memory", "64Mi"))),
			ctr("init", rl("cpu", "2", "memory", "16Mi"), rl("cpu", "3", "memory", "32Mi"))),
		wantQOS: v1.PodQOSBurstable,
		// requests max(2, 0.5) cpu; limits max(3, 1) cpu, max(32Mi, 128Mi) memory.
		want: &cgroup.ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(300000), CPUPeriod: u64(100000), Memory: i64(128 * mi)},
	}, {
		name: "a sidecar counts with the app containers and with later init containers",
		pod: withInit(podOf("b",
			ctr("a", rl("cpu", "500m", "memory", "32Mi"), rl("cpu", "500m", "memory", "64Mi"))),
			sidecar("proxy", rl("cpu", "500m", "memory", "32Mi"), rl("cpu", "500m", "memory", "64Mi")),
			ctr("init", rl("cpu", "1500m", "memory", "16Mi"), rl("cpu", "1500m", "memory", "16Mi"))),
		wantQOS: v1.PodQOSBurstable,
		// app+sidecar 1 cpu; init 1.5 + sidecar 0.5 = 2 cpu.
		want: &cgroup.ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(128 * mi)},
	}, {
		name:    "guaranteed pod with an init container: the larger need wins",
		pod:     withInit(podOf("g", ctr("a", guaranteed, guaranteed)), ctr("init", rl("cpu", "2", "memory", "128Mi"), rl("cpu", "2", "memory", "128Mi"))),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(128 * mi)},
	}, {
		name:    "pod overhead is added to the requests and to the limits",
		pod:     withOverhead(podOf("g", ctr("a", guaranteed, guaranteed)), rl("cpu", "100m", "memory", "10Mi")),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(1126), CPUQuota: i64(110000), CPUPeriod: u64(100000), Memory: i64(74 * mi)},
	}, {
		name:    "pod overhead is not added to a limit that is not set",
		pod:     withOverhead(podOf("b", ctr("a", rl("cpu", "100m"), rl("memory", "64Mi"))), rl("cpu", "100m", "memory", "10Mi")),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(204), Memory: i64(74 * mi)},
	}, {
		name:    "pod-level resources replace the containers' and declare the limits",
		pod:     withPodLevel(podOf("p", ctr("a", nil, nil), ctr("b", rl("cpu", "100m"), nil)), rl("cpu", "1", "memory", "512Mi"), rl("cpu", "2", "memory", "1Gi")),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(1024 * mi)},
	}, {
		name:    "pod-level requests equal to limits make the pod guaranteed",
		pod:     withPodLevel(podOf("p", ctr("a", nil, nil)), rl("cpu", "2", "memory", "1Gi"), rl("cpu", "2", "memory", "1Gi")),
		wantQOS: v1.PodQOSGuaranteed,
		want:    &cgroup.ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(1024 * mi)},
	}, {
		name:    "pod-level memory limit only: memory but no quota",
		pod:     withPodLevel(podOf("p", ctr("a", rl("cpu", "100m"), nil)), nil, rl("memory", "256Mi")),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(102), Memory: i64(256 * mi)},
	}, {
		name:    "status.qosClass, when set, is the class",
		pod:     withStatusQOS(podOf("s", ctr("a", guaranteed, guaranteed)), v1.PodQOSBurstable),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(64 * mi)},
	}, {
		name: "hugepages requests are the hugetlb limits, summed over containers",
		pod: podOf("h",
			ctr("a", rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "4Mi"), rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "4Mi")),
			ctr("b", rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "2Mi", "hugepages-1Gi", "1Gi"), rl("cpu", "1", "memory", "64Mi", "hugepages-2Mi", "2Mi", "hugepages-1Gi", "1Gi"))),
		wantQOS: v1.PodQOSGuaranteed,
		want: &cgroup.ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(128 * mi),
			HugePageLimits: map[int64]int64{2 * mi: 6 * mi, 1024 * mi: 1024 * mi}},
	}, {
		name:    "a hugepages limit without a request counts (the API defaults the request to it)",
		pod:     podOf("h", ctr("a", rl("cpu", "100m"), rl("hugepages-2Mi", "8Mi"))),
		wantQOS: v1.PodQOSBurstable,
		want:    &cgroup.ResourceConfig{CPUShares: u64(102), HugePageLimits: map[int64]int64{2 * mi: 8 * mi}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podmodel.QOSClass(tt.pod); got != tt.wantQOS {
				t.Errorf("QOSClass = %s, want %s", got, tt.wantQOS)
			}
			got := cgroup.ResourceConfigForPod(tt.pod, !tt.noCPULimits)
			if tt.want.HugePageLimits == nil {
				// No hugepages: every page size limited to 0.
				tt.want.HugePageLimits = map[int64]int64{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ResourceConfigForPod (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCPUConversions(t *testing.T) {
	shares := []struct {
		milli int64
		want  uint64
	}{{0, 2}, {1, 2}, {2, 2}, {100, 102}, {250, 256}, {1000, 1024}, {256000, 262144}, {300000, 262144}, {1 << 62, 262144}}
	for _, tt := range shares {
		if got := cgroup.MilliCPUToShares(tt.milli); got != tt.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
	quotas := []struct {
		milli, want int64
	}{{0, 0}, {1, 1000}, {10, 1000}, {11, 1100}, {500, 50000}, {2500, 250000}}
	for _, tt := range quotas {
		if got := cgroup.MilliCPUToQuota(tt.milli, cgroup.QuotaPeriod); got != tt.want {
			t.Errorf("MilliCPUToQuota(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
	// weight = 1 + (shares - 2) * 9999 / 262142
	weights := []struct {
		shares, want uint64
	}{{0, 1}, {2, 1}, {3, 1}, {28, 1}, {29, 2}, {102, 4}, {1024, 39}, {2048, 79}, {262143, 9999}, {262144, 10000}, {1 << 40, 10000}}
	for _, tt := range weights {
		if got := cgroup.CPUSharesToWeight(tt.shares); got != tt.want {
			t.Errorf("CPUSharesToWeight(%d) = %d, want %d", tt.shares, got, tt.want)
		}
	}
	for w := uint64(1); w <= cgroup.MaxWeight; w++ {
		if got := cgroup.CPUSharesToWeight(cgroup.CPUWeightToShares(w)); got != w {
			t.Fatalf("CPUSharesToWeight(CPUWeightToShares(%d)) = %d", w, got)
		}
	}
}

func TestPodRequests(t *testing.T) {
	p := podOf("x", ctr("a", rl("cpu", "500m", "memory", "32Mi", "example.com/gpu", "1"), nil))
	p.Spec.InitContainers = []v1.Container{ctr("init", rl("cpu", "2"), nil)}
	p.Spec.Overhead = rl("cpu", "100m")
	want := rl("cpu", "2100m", "memory", "32Mi", "example.com/gpu", "1")
	got := podmodel.Requests(p)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("PodRequests (-want +got):\n%s", diff)
	}
}
