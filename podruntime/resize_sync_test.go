package podruntime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// steps records a resize's cgroup writes and container updates in order.
type steps struct {
	mu  sync.Mutex
	log []string
}

func (s *steps) add(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func (s *steps) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.log
	s.log = nil
	return out
}

// updateRecorder records UpdateContainerResources, failing it when fail
// is set.
type updateRecorder struct {
	*runtimetest.Runtime
	steps *steps
	fail  error
}

func (u *updateRecorder) UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.ContainerResources) error {
	if u.fail != nil {
		return u.fail
	}
	u.steps.add("container memory=%d quota=%d", r.GetLinux().GetMemoryLimitInBytes(), r.GetLinux().GetCpuQuota())
	return u.Runtime.UpdateContainerResources(ctx, id, r)
}

// fakePodCgroup is a pod cgroup in memory.
type fakePodCgroup struct {
	steps *steps
	cur   runtime.PodCgroupConfig
}

func i64(v int64) *int64   { return &v }
func u64(v uint64) *uint64 { return &v }
func (f *fakePodCgroup) Current(*v1.Pod) (runtime.PodCgroupConfig, uint64, error) {
	return f.cur, 0, nil
}

func (f *fakePodCgroup) Desired(pod *v1.Pod) runtime.PodCgroupConfig {
	c := pod.Spec.Containers[0].Resources
	if pod.Spec.Resources != nil {
		c = *pod.Spec.Resources
	}
	return runtime.PodCgroupConfig{
		CPUShares: u64(uint64(c.Requests.Cpu().MilliValue() * 1024 / 1000)),
		CPUQuota:  i64(c.Limits.Cpu().MilliValue() * 100),
		CPUPeriod: u64(100000),
		Memory:    i64(c.Limits.Memory().Value()),
	}
}

func (f *fakePodCgroup) Set(_ *v1.Pod, cfg runtime.PodCgroupConfig) error {
	switch {
	case cfg.Memory != nil:
		f.steps.add("pod memory=%d", *cfg.Memory)
		f.cur.Memory = cfg.Memory
	case cfg.CPUQuota != nil:
		f.steps.add("pod quota=%d", *cfg.CPUQuota)
		f.cur.CPUQuota = cfg.CPUQuota
	case cfg.CPUShares != nil:
		f.steps.add("pod shares=%d", *cfg.CPUShares)
		f.cur.CPUShares = cfg.CPUShares
	}
	return nil
}

func resizePod(cpu, mem string) *v1.Pod {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default", UID: "r-uid"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{
				Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: q(cpu), v1.ResourceMemory: q("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceCPU: q(cpu), v1.ResourceMemory: q(mem)},
				},
			}},
		},
	}
}

// TestSyncPodResizeOrder: an increase sets the pod cgroup's limit before
// the container's, a decrease after it, memory before CPU, and the
// container keeps its ID; a refused UpdateContainerResources is recorded
// as the pod's ResizeError until a resize succeeds.
func TestSyncPodResizeOrder(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	st := &steps{}
	rs := &updateRecorder{Runtime: rt, steps: st}
	m, err := podruntime.New(rs, rt, podruntime.Options{PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pc := &fakePodCgroup{steps: st}
	sync := func(pod *v1.Pod) podruntime.SyncResult {
		t.Helper()
		s, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return m.SyncPodWithOptions(ctx, pod, s, podruntime.SyncPodOptions{PodCgroup: pc})
	}
	pod := resizePod("500m", "128Mi")
	pc.cur = pc.Desired(pod)
	if err := sync(pod).Err(); err != nil {
		t.Fatal(err)
	}
	s0, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	id := s0.FindContainerStatusByName("app").ID

	up := resizePod("1", "256Mi")
	if err := sync(up).Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pod memory=268435456", "container memory=268435456 quota=50000",
		"pod quota=100000", "pod shares=1024", "container memory=268435456 quota=100000",
	}
	if d := cmp.Diff(want, st.take()); d != "" {
		t.Errorf("increase (-want +got):\n%s", d)
	}
	down := resizePod("250m", "64Mi")
	if err := sync(down).Err(); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"container memory=67108864 quota=100000", "pod memory=67108864",
		"container memory=67108864 quota=25000", "pod shares=256", "pod quota=25000",
	}
	if d := cmp.Diff(want, st.take()); d != "" {
		t.Errorf("decrease (-want +got):\n%s", d)
	}
	s1, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	cs := s1.FindContainerStatusByName("app")
	if cs.ID != id || cs.RestartCount != 0 {
		t.Errorf("container %s restart %d, want %s unchanged", cs.ID, cs.RestartCount, id)
	}
	if runtime.ContainerResized(&down.Spec.Containers[0], cs) {
		t.Errorf("runtime resources %+v do not match the spec after the resize", cs.Resources)
	}
	if err := sync(down).Err(); err != nil || len(st.take()) != 0 {
		t.Errorf("a resized pod's sync changed something (err %v)", err)
	}

	rs.fail = errors.New("refused")
	res := sync(resizePod("500m", "64Mi"))
	if !errors.Is(res.Err(), podruntime.ErrResizePodInPlace) {
		t.Fatalf("sync error %v, want ErrResizePodInPlace", res.Err())
	}
	if msg, ok := m.ResizeError(pod.UID); !ok || msg == "" {
		t.Errorf("ResizeError = %q, %v after a failed update", msg, ok)
	}
	rs.fail = nil
	if err := sync(resizePod("500m", "64Mi")).Err(); err != nil {
		t.Fatal(err)
	}
	if msg, ok := m.ResizeError(pod.UID); ok {
		t.Errorf("ResizeError = %q after a successful resize", msg)
	}
}

// podLevelPod is a pod whose pod-level resources (spec.resources) set its
// cgroup; its container sets none.
func podLevelPod(cpu, mem string) *v1.Pod {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	pod := resizePod("1", "1Gi")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	pod.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q(cpu), v1.ResourceMemory: q(mem)},
		Limits:   v1.ResourceList{v1.ResourceCPU: q(cpu), v1.ResourceMemory: q(mem)},
	}
	return pod
}

// TestSyncPodPodLevelResize: a resize of the pod-level resources alone
// moves the pod cgroup to them (memory, then CPU: limit before request
// when increasing, after when decreasing), updates no container and
// restarts none; once the cgroup has them a sync changes nothing.
func TestSyncPodPodLevelResize(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	st := &steps{}
	rs := &updateRecorder{Runtime: rt, steps: st}
	m, err := podruntime.New(rs, rt, podruntime.Options{PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pc := &fakePodCgroup{steps: st}
	sync := func(pod *v1.Pod) podruntime.SyncResult {
		t.Helper()
		s, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return m.SyncPodWithOptions(ctx, pod, s, podruntime.SyncPodOptions{PodCgroup: pc})
	}
	pod := podLevelPod("500m", "128Mi")
	pc.cur = pc.Desired(pod)
	if err := sync(pod).Err(); err != nil {
		t.Fatal(err)
	}
	st.take()
	s0, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	id := s0.FindContainerStatusByName("app").ID

	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"increase", podLevelPod("1", "256Mi"), []string{"pod memory=268435456", "pod quota=100000", "pod shares=1024"}},
		{"unchanged", podLevelPod("1", "256Mi"), nil},
		{"decrease", podLevelPod("250m", "64Mi"), []string{"pod memory=67108864", "pod shares=256", "pod quota=25000"}},
	} {
		res := sync(tc.pod)
		if err := res.Err(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := cmp.Diff(tc.want, st.take()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		if runtime.PodCgroupResized(pc.cur, pc.Desired(tc.pod)) {
			t.Errorf("%s: pod cgroup %+v does not match the pod-level resources", tc.name, pc.cur)
		}
	}
	s1, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if cs := s1.FindContainerStatusByName("app"); cs.ID != id || cs.RestartCount != 0 {
		t.Errorf("container %s restart %d, want %s unchanged", cs.ID, cs.RestartCount, id)
	}
}

// TestPodCgroupResized: the pod cgroup differs from its desired
// configuration when a known value differs in effect.
func TestPodCgroupResized(t *testing.T) {
	cfg := func(shares uint64, quota int64, mem int64) runtime.PodCgroupConfig {
		return runtime.PodCgroupConfig{CPUShares: u64(shares), CPUQuota: i64(quota), CPUPeriod: u64(100000), Memory: i64(mem)}
	}
	tests := []struct {
		name      string
		cur, want runtime.PodCgroupConfig
		resized   bool
	}{
		{"same", cfg(1024, 100000, 1<<28), cfg(1024, 100000, 1<<28), false},
		{"memory limit", cfg(1024, 100000, 1<<28), cfg(1024, 100000, 1<<29), true},
		{"memory unlimited to limited", cfg(1024, 100000, -1), cfg(1024, 100000, 1<<29), true},
		{"cpu quota", cfg(1024, 50000, 1<<28), cfg(1024, 100000, 1<<28), true},
		{"cpu unlimited to limited", cfg(1024, -1, 1<<28), cfg(1024, 100000, 1<<28), true},
		{"cpu shares", cfg(512, 100000, 1<<28), cfg(1024, 100000, 1<<28), true},
		// cgroup v2 keeps the weight: shares read back from it.
		{"shares of the same weight", cfg(1022, 100000, 1<<28), cfg(1024, 100000, 1<<28), false},
		{"quotas below the smallest limit", cfg(1024, 1000, 1<<28), cfg(1024, 500, 1<<28), false},
		{"unknown values", runtime.PodCgroupConfig{}, cfg(1024, 100000, 1<<28), false},
	}
	for _, tt := range tests {
		if got := runtime.PodCgroupResized(tt.cur, tt.want); got != tt.resized {
			t.Errorf("%s: PodCgroupResized = %v, want %v", tt.name, got, tt.resized)
		}
	}
}

// TestSyncPodPodLevelAndContainerResize: when a pod's pod-level resources
// and a container's grow together, the pod cgroup is raised before the
// container, and lowered after it when both shrink.
func TestSyncPodPodLevelAndContainerResize(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	st := &steps{}
	m, err := podruntime.New(&updateRecorder{Runtime: rt, steps: st}, rt, podruntime.Options{PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pc := &fakePodCgroup{steps: st}
	sync := func(pod *v1.Pod) {
		t.Helper()
		s, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SyncPodWithOptions(ctx, pod, s, podruntime.SyncPodOptions{PodCgroup: pc}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	both := func(podMem, ctrMem string) *v1.Pod {
		p := podLevelPod("1", podMem)
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse(ctrMem)},
		}
		return p
	}
	pod := both("256Mi", "128Mi")
	pc.cur = pc.Desired(pod)
	sync(pod)
	st.take()
	sync(both("512Mi", "256Mi"))
	if d := cmp.Diff([]string{"pod memory=536870912", "container memory=268435456 quota=100000"}, st.take()); d != "" {
		t.Errorf("increase (-want +got):\n%s", d)
	}
	sync(both("128Mi", "64Mi"))
	if d := cmp.Diff([]string{"container memory=67108864 quota=100000", "pod memory=134217728"}, st.take()); d != "" {
		t.Errorf("decrease (-want +got):\n%s", d)
	}
}
