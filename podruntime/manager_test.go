package podruntime

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodekit/nodekit/runtime"
)

func TestNewValidates(t *testing.T) {
	rs, is := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	tests := []struct {
		name string
		rs   runtime.RuntimeService
		is   runtime.ImageService
		opts Options
	}{
		{"no runtime", nil, is, Options{}},
		{"no image service", rs, nil, Options{}},
		{"relative logs dir", rs, is, Options{PodLogsDir: "logs"}},
		{"negative back-off", rs, is, Options{BackOff: BackOffOptions{Initial: -time.Second}}},
		{"negative grace", rs, is, Options{MinGracePeriod: -time.Second}},
		{"negative status reads", rs, is, Options{MaxParallelStatusReads: -1}},
		{"file work without room", rs, is, Options{FileWork: make(chan struct{})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.rs, tt.is, tt.opts); err == nil || !strings.HasPrefix(err.Error(), "podruntime: ") {
				t.Errorf("err = %v, want a podruntime: error", err)
			}
		})
	}
	m, err := New(rs, is, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{PodLogsDir: "/var/log/pods", MinGracePeriod: 2 * time.Second,
		DNS: DNSOptions{ResolvConf: "/etc/resolv.conf"}, HostsFile: "/etc/hosts",
		BackOff:      BackOffOptions{Initial: 10 * time.Second, Max: 300 * time.Second, Reset: 10 * time.Minute},
		ImageBackOff: BackOffOptions{Initial: 10 * time.Second, Max: 300 * time.Second, Reset: 10 * time.Minute}}
	if diff := cmp.Diff(want, m.opts, cmp.FilterPath(func(p cmp.Path) bool {
		return p.String() == "Logger" || p.String() == "Unhealthy" || p.String() == "Env" || p.String() == "FileWork"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := cap(m.opts.FileWork); got != filesParallelism {
		t.Errorf("FileWork has room for %d, want %d", got, filesParallelism)
	}
	if len(rs.Called) != 0 {
		t.Errorf("New called the runtime: %v", rs.Called)
	}
}

func TestStatus(t *testing.T) {
	cond := func(typ string, ok bool) *runtimeapi.RuntimeCondition {
		return &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: "R", Message: "M"}
	}
	tests := []struct {
		name    string
		status  *runtimeapi.RuntimeStatus
		wantErr []error
	}{
		{"ready", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{cond(runtimeapi.RuntimeReady, true), cond(runtimeapi.NetworkReady, true)}}, nil},
		{"network not ready", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{cond(runtimeapi.RuntimeReady, true), cond(runtimeapi.NetworkReady, false)}},
			[]error{ErrNetworkNotReady}},
		{"runtime not ready", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{cond(runtimeapi.RuntimeReady, false), cond(runtimeapi.NetworkReady, true)}},
			[]error{ErrRuntimeNotReady}},
		{"both missing", &runtimeapi.RuntimeStatus{}, []error{ErrRuntimeNotReady, ErrNetworkNotReady}},
		{"no status", nil, []error{ErrRuntimeNotReady}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, Options{})
			f.rs.FakeStatus = tt.status
			err := f.m.Status(t.Context())
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("Status = %v", err)
			}
			for _, w := range tt.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("Status = %v, want %v", err, w)
				}
			}
			if len(tt.wantErr) == 1 && errors.Is(err, ErrNetworkNotReady) && errors.Is(err, ErrRuntimeNotReady) {
				t.Errorf("Status = %v reports both conditions", err)
			}
		})
	}
	f := newFakes(t, Options{})
	f.rs.InjectError("Status", errors.New("unavailable"))
	if err := f.m.Status(t.Context()); err == nil {
		t.Error("Status ignored an RPC error")
	}
}

func TestGetPods(t *testing.T) {
	f := newFakes(t, Options{})
	a := testPod("a", "x", "y")
	b := testPod("b", "x")
	f.sync(t, a)
	f.sync(t, b)
	f.exit(a, "y", 0)
	// A sandbox that is not nodekit's is left out.
	if _, err := f.rs.RunPodSandbox(t.Context(), &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "foreign", Uid: "f"}}, ""); err != nil {
		t.Fatal(err)
	}

	summary := func(pods []*runtime.Pod) []string {
		var out []string
		for _, p := range pods {
			s := string(p.ID) + " " + p.Namespace + "/" + p.Name + ":"
			for _, c := range p.Containers {
				s += " " + c.Name + "=" + string(c.State)
			}
			s += " sandboxes"
			for _, sb := range p.Sandboxes {
				s += " " + string(sb.State)
			}
			out = append(out, s)
		}
		return out
	}
	all, err := f.m.GetPods(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	got := summary(all)
	// Container order within a pod is newest first; the fake may create both
	// in the same nanosecond, so compare as sets per pod.
	want := []string{"a-uid default/a: x=running y=exited sandboxes running", "b-uid default/b: x=running sandboxes running"}
	alt := []string{"a-uid default/a: y=exited x=running sandboxes running", want[1]}
	if !cmp.Equal(want, got) && !cmp.Equal(alt, got) {
		t.Errorf("GetPods(all) = %v, want %v", got, want)
	}
	for _, c := range all[0].Containers {
		if c.Hash == "" || c.Image != "busybox:1.36" || c.CreatedAt == 0 {
			t.Errorf("container %+v lacks hash, image or creation time", c)
		}
	}

	runningOnly, err := f.m.GetPods(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-uid default/a: x=running sandboxes running", "b-uid default/b: x=running sandboxes running"}, summary(runningOnly)); diff != "" {
		t.Errorf("GetPods(running) (-want +got):\n%s", diff)
	}
}

func TestGetPodStatus(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("st", "a")
	f.sync(t, pod)
	st := f.status(t, pod)
	if st.ID != pod.UID || st.Name != "st" || st.Namespace != "default" || st.TimeStamp.IsZero() {
		t.Errorf("identity = %+v", st)
	}
	if diff := cmp.Diff([]string{critest.FakePodSandboxIPs[0]}, st.IPs); diff != "" {
		t.Errorf("IPs (-want +got):\n%s", diff)
	}
	if len(st.SandboxStatuses) != 1 || len(st.ContainerStatuses) != 1 {
		t.Fatalf("statuses = %d sandboxes, %d containers", len(st.SandboxStatuses), len(st.ContainerStatuses))
	}
	c := st.ContainerStatuses[0]
	if c.Name != "a" || c.State != runtime.ContainerStateRunning || c.Hash != runtime.HashContainer(&pod.Spec.Containers[0]) || c.StartedAt.IsZero() {
		t.Errorf("container status = %+v", c)
	}

	// A stopped newest sandbox gives no IPs.
	f.exit(pod, "a", 3)
	if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	st = f.status(t, pod)
	if len(st.IPs) != 0 {
		t.Errorf("IPs of a stopped sandbox = %v", st.IPs)
	}
	if c := st.ContainerStatuses[0]; c.State != runtime.ContainerStateExited || c.FinishedAt.IsZero() {
		t.Errorf("exited container status = %+v", c)
	}

	// Containers removed between the list and the status are skipped.
	f.rs.InjectError("ContainerStatus", status.Error(codes.NotFound, "gone"))
	st, err := f.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatalf("GetPodStatus with a vanished container: %v", err)
	}
	if len(st.ContainerStatuses) != 0 {
		t.Errorf("vanished container reported: %+v", st.ContainerStatuses)
	}
	f.rs.InjectError("ContainerStatus", errors.New("broken"))
	if _, err := f.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace); err == nil {
		t.Error("GetPodStatus ignored a ContainerStatus error")
	}
}

func TestIsNotFound(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("x"), false},
		{status.Error(codes.NotFound, "x"), true},
		{status.Error(codes.Unavailable, "x"), false},
		{runtime.ErrNotFound, true},
		{errors.Join(errors.New("a"), runtime.ErrNotFound), true},
	}
	for _, tt := range tests {
		if got := runtime.IsNotFound(tt.err); got != tt.want {
			t.Errorf("IsNotFound(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
