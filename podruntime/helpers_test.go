package podruntime

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodekit/nodekit/runtime"
)

// recorder wraps cri-api's fake runtime to keep the configs and stop
// timeouts it was given.
type recorder struct {
	*critest.FakeRuntimeService

	mu               sync.Mutex
	sandboxConfigs   []*runtimeapi.PodSandboxConfig
	containerConfigs []*runtimeapi.ContainerConfig
	stops            map[string]int64
	// stopHook, when set, runs inside StopContainer before the fake.
	stopHook func(id string)
}

func (r *recorder) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	r.sandboxConfigs = append(r.sandboxConfigs, cfg)
	r.mu.Unlock()
	return r.FakeRuntimeService.RunPodSandbox(ctx, cfg, handler)
}

func (r *recorder) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, scfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.containerConfigs = append(r.containerConfigs, cfg)
	r.mu.Unlock()
	return r.FakeRuntimeService.CreateContainer(ctx, sandboxID, cfg, scfg)
}

func (r *recorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	if r.stopHook != nil {
		r.stopHook(id)
	}
	r.mu.Lock()
	r.stops[id] = timeout
	r.mu.Unlock()
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

// lastContainerConfig returns the newest config given for the container.
func (r *recorder) lastContainerConfig(name string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.containerConfigs) - 1; i >= 0; i-- {
		if r.containerConfigs[i].Metadata.Name == name {
			return r.containerConfigs[i]
		}
	}
	return nil
}

func (r *recorder) stopTimeouts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.stops
	r.stops = map[string]int64{}
	return out
}

// fakes bundles a manager with cri-api's recording fakes.
type fakes struct {
	m   *Manager
	rs  *critest.FakeRuntimeService
	rec *recorder
	is  *critest.FakeImageService
	dir string
	// unhealthy is passed to each sync as SyncPodOptions.Unhealthy.
	unhealthy UnhealthyFunc
}

func newFakes(t *testing.T, opts Options) *fakes {
	t.Helper()
	rs := critest.NewFakeRuntimeService()
	is := critest.NewFakeImageService()
	is.SetFakeImages([]string{"busybox:1.36", "nginx:1.25", "app:v1", "app:v2", "init:v1"})
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = t.TempDir()
	}
	if opts.DNS.ResolvConf == "" {
		// The tests do not depend on the machine's resolver.
		opts.DNS.ResolvConf = filepath.Join(t.TempDir(), "resolv.conf")
		if err := os.WriteFile(opts.DNS.ResolvConf, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{FakeRuntimeService: rs, stops: map[string]int64{}}
	m, err := New(rec, is, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fakes{m: m, rs: rs, rec: rec, is: is, dir: opts.PodLogsDir}
}

// status reads the pod's status from the runtime.
func (f *fakes) status(t *testing.T, pod *v1.Pod) *runtime.PodStatus {
	t.Helper()
	s, err := f.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	return s
}

// sync reads the status and syncs the pod once.
func (f *fakes) sync(t *testing.T, pod *v1.Pod) SyncResult {
	t.Helper()
	return f.m.SyncPodWithOptions(t.Context(), pod, f.status(t, pod), SyncPodOptions{Unhealthy: f.unhealthy})
}

// calls returns and clears the runtime calls recorded so far, leaving out
// the read-only ones.
func (f *fakes) calls() []string {
	f.rs.Lock()
	defer f.rs.Unlock()
	var out []string
	for _, c := range f.rs.Called {
		switch c {
		case "ListPodSandbox", "ListContainers", "PodSandboxStatus", "ContainerStatus", "Version", "Status":
			continue
		}
		out = append(out, c)
	}
	f.rs.Called = nil
	return out
}

// container returns the newest fake container of the pod with that name.
func (f *fakes) container(pod *v1.Pod, name string) *critest.FakeContainer {
	f.rs.Lock()
	defer f.rs.Unlock()
	var best *critest.FakeContainer
	for _, c := range f.rs.Containers {
		if c.Labels[runtime.LabelPodUID] != string(pod.UID) || c.Metadata.Name != name {
			continue
		}
		if best == nil || c.CreatedAt > best.CreatedAt || (c.CreatedAt == best.CreatedAt && c.Metadata.Attempt > best.Metadata.Attempt) {
			best = c
		}
	}
	return best
}

// exit makes the newest instance of the container exit with code.
func (f *fakes) exit(pod *v1.Pod, name string, code int32) {
	c := f.container(pod, name)
	f.rs.Lock()
	defer f.rs.Unlock()
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = time.Now().UnixNano()
	if c.StartedAt == 0 {
		c.StartedAt = c.FinishedAt
	}
}

// countContainers counts the fake containers of the pod with that name.
func (f *fakes) countContainers(pod *v1.Pod, name string) int {
	f.rs.Lock()
	defer f.rs.Unlock()
	n := 0
	for _, c := range f.rs.Containers {
		if c.Labels[runtime.LabelPodUID] == string(pod.UID) && c.Metadata.Name == name {
			n++
		}
	}
	return n
}

func testPod(name string, containers ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			NodeName:                      "node1",
		},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent})
	}
	return pod
}

func ptr[T any](v T) *T { return &v }

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
