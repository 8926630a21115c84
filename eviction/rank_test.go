package eviction

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod is an API pod (source "api", so not critical) with one container
// requesting memory (and limiting it, for Guaranteed, when limit).
func pod(name string, priority int32, memRequest string, limit bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
			Annotations: map[string]string{"kubernetes.io/config.source": "api"}},
		Spec: v1.PodSpec{Priority: &priority, Containers: []v1.Container{{Name: "c"}}},
	}
	if memRequest != "" {
		q := resource.MustParse(memRequest)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q}
		if limit {
			cpu := resource.MustParse("100m")
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = cpu
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: q, v1.ResourceCPU: cpu}
		}
	}
	return p
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestRank(t *testing.T) {
	memStats := func(m map[string]uint64) map[types.UID]PodStats {
		out := map[types.UID]PodStats{}
		for k, v := range m {
			out[types.UID(k)] = PodStats{MemoryWorkingSet: u64(v * mi), EphemeralStorage: u64(v * mi), Processes: u64(v)}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		signal Signal
		pods   []*v1.Pod
		stats  map[types.UID]PodStats
		want   []string
	}{{
		name:   "memory: above requests first, whatever the priority; then priority; then usage above requests",
		signal: SignalMemoryAvailable,
		pods: []*v1.Pod{
			pod("guaranteed-within", 0, "500Mi", true),
			pod("burstable-over-hi-prio", 1000, "100Mi", false),
			pod("besteffort-small", 0, "", false),
			pod("besteffort-big", 0, "", false),
			pod("burstable-over-lo-prio", -5, "100Mi", false),
		},
		stats: memStats(map[string]uint64{"guaranteed-within": 400, "burstable-over-hi-prio": 900, "besteffort-small": 10, "besteffort-big": 300, "burstable-over-lo-prio": 150}),
		want:  []string{"burstable-over-lo-prio", "besteffort-big", "besteffort-small", "burstable-over-hi-prio", "guaranteed-within"},
	}, {
		name:   "memory: a BestEffort pod hungry for memory goes before a Guaranteed one",
		signal: SignalMemoryAvailable,
		pods:   []*v1.Pod{pod("guaranteed", 0, "200Mi", true), pod("besteffort", 0, "", false)},
		stats:  memStats(map[string]uint64{"guaranteed": 190, "besteffort": 50}),
		want:   []string{"besteffort", "guaranteed"},
	}, {
		name:   "pods without stats come first, as with the kubelet",
		signal: SignalMemoryAvailable,
		pods:   []*v1.Pod{pod("measured", 0, "", false), pod("unmeasured", 0, "", false)},
		stats:  memStats(map[string]uint64{"measured": 50}),
		want:   []string{"unmeasured", "measured"},
	}, {
		name:   "disk: ephemeral storage above requests, then priority, then usage",
		signal: SignalNodeFsAvailable,
		pods:   []*v1.Pod{pod("small", 0, "", false), pod("big", 0, "", false), pod("low-prio", -1, "", false)},
		stats:  memStats(map[string]uint64{"small": 1, "big": 100, "low-prio": 1}),
		want:   []string{"low-prio", "big", "small"},
	}, {
		name:   "pid: priority, then processes",
		signal: SignalPIDAvailable,
		pods:   []*v1.Pod{pod("many", 0, "", false), pod("few-lo", -1, "", false), pod("few", 0, "", false)},
		stats:  memStats(map[string]uint64{"many": 500, "few-lo": 1, "few": 2}),
		want:   []string{"few-lo", "many", "few"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			Rank(tc.signal, tc.pods, tc.stats)
			if diff := cmp.Diff(tc.want, names(tc.pods)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	p := pod("hog", 0, "100Mi", false)
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "quiet"})
	ps := &PodStats{Containers: map[string]ContainerStats{
		"c":     {MemoryWorkingSet: u64(300 * mi)},
		"quiet": {MemoryWorkingSet: u64(0)},
	}}
	th := DefaultHard()
	obs := Observations{SignalMemoryAvailable: {Available: 80 * mi, Capacity: 1000 * mi}}
	got := Message(th[0], p, ps, th, obs)
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container c was using 300Mi, request is 100Mi, has larger consumption of memory. "
	if got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
	s := &v1.PodStatus{Phase: v1.PodRunning}
	StatusFunc(got)(s)
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message != got || len(s.Conditions) != 1 ||
		s.Conditions[0].Type != v1.DisruptionTarget || s.Conditions[0].Reason != "TerminationByKubelet" {
		t.Errorf("status after eviction = %+v", s)
	}
}

func TestAdmit(t *testing.T) {
	be := pod("be", 0, "", false)
	burst := pod("burst", 0, "100Mi", false)
	tolerant := pod("tolerant", 0, "", false)
	tolerant.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	static := pod("static", 0, "", false)
	static.Annotations["kubernetes.io/config.source"] = "file"
	mem := []v1.NodeConditionType{v1.NodeMemoryPressure}
	disk := []v1.NodeConditionType{v1.NodeDiskPressure}
	for _, tc := range []struct {
		pod   *v1.Pod
		conds []v1.NodeConditionType
		ok    bool
	}{
		{be, nil, true},
		{be, mem, false},
		{burst, mem, true},
		{tolerant, mem, true},
		{static, mem, true},
		{burst, disk, false},
		{static, disk, true},
	} {
		ok, reason, msg := Admit(tc.pod, tc.conds)
		if ok != tc.ok {
			t.Errorf("Admit(%s, %v) = %t, want %t", tc.pod.Name, tc.conds, ok, tc.ok)
		}
		if !ok && (reason != "Evicted" || msg != "The node had condition: "+fmtConds(tc.conds)+". ") {
			t.Errorf("Admit(%s, %v) = %q, %q", tc.pod.Name, tc.conds, reason, msg)
		}
	}
}

func fmtConds(c []v1.NodeConditionType) string {
	s := "["
	for i, x := range c {
		if i > 0 {
			s += " "
		}
		s += string(x)
	}
	return s + "]"
}
