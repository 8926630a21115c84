package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

func sandboxConfig(name, uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Labels: map[string]string{
			runtime.LabelPodName:      name,
			runtime.LabelPodNamespace: "default",
			runtime.LabelPodUID:       uid,
		},
		Annotations: map[string]string{"a": "b"},
	}
}

func containerConfig(name string, command ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  command,
		Labels:   map[string]string{runtime.LabelContainerName: name},
	}
}

// runPod starts a sandbox with one started container running command.
func runPod(t *testing.T, r *Runtime, uid string, command ...string) (sandboxID, containerID string) {
	t.Helper()
	ctx := t.Context()
	sc := sandboxConfig("pod-"+uid, uid)
	sandboxID, err := r.RunPodSandbox(ctx, sc, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	containerID, err = r.CreateContainer(ctx, sandboxID, containerConfig("c", command...), sc)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := r.StartContainer(ctx, containerID); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return sandboxID, containerID
}

func containerStatus(t *testing.T, r *Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := r.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus(%s): %v", id, err)
	}
	return resp.Status
}

type exitView struct {
	State    runtimeapi.ContainerState
	ExitCode int32
	Reason   string
}

func exitOf(s *runtimeapi.ContainerStatus) exitView {
	return exitView{State: s.State, ExitCode: s.ExitCode, Reason: s.Reason}
}

func TestSandboxLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx := t.Context()
		start := time.Now()

		sc := sandboxConfig("web", "uid-1")
		id, err := r.RunPodSandbox(ctx, sc, "runc")
		if err != nil {
			t.Fatal(err)
		}
		sc.Labels["mutated"] = "later" // the runtime keeps its own copy
		resp, err := r.PodSandboxStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Status
		if st.Id != id || st.State != runtimeapi.PodSandboxState_SANDBOX_READY || st.Network.GetIp() != "10.88.0.2" ||
			st.Metadata.Name != "web" || st.Metadata.Uid != "uid-1" || st.RuntimeHandler != "runc" ||
			st.CreatedAt != start.UnixNano() || st.Labels["mutated"] != "" || st.Labels[runtime.LabelPodUID] != "uid-1" ||
			st.Annotations["a"] != "b" {
			t.Errorf("PodSandboxStatus = %v", st)
		}
		if len(id) != 64 {
			t.Errorf("sandbox ID %q is not 64 hex digits", id)
		}

		// A second sandbox gets the next address; the host network none.
		id2, _ := r.RunPodSandbox(ctx, sandboxConfig("b", "uid-2"), "")
		hc := sandboxConfig("host", "uid-3")
		hc.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}}
		id3, _ := r.RunPodSandbox(ctx, hc, "")
		var ips []string
		for _, s := range r.Sandboxes() {
			ips = append(ips, s.IP)
		}
		if diff := cmp.Diff([]string{"10.88.0.2", "10.88.0.3", ""}, ips); diff != "" {
			t.Errorf("sandbox IPs (-want +got):\n%s", diff)
		}

		if err := r.StopPodSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := r.StopPodSandbox(ctx, id); err != nil {
			t.Errorf("second StopPodSandbox: %v", err)
		}
		resp, _ = r.PodSandboxStatus(ctx, id, false)
		if resp.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Errorf("state after stop = %v", resp.Status.State)
		}
		if st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("an object returned before the stop changed: %v", st.State)
		}
		if err := r.RemovePodSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := r.RemovePodSandbox(ctx, id); err != nil {
			t.Errorf("RemovePodSandbox of a removed sandbox: %v", err)
		}
		if _, err := r.PodSandboxStatus(ctx, id, false); status.Code(err) != codes.NotFound {
			t.Errorf("PodSandboxStatus after remove: %v, want NotFound", err)
		}
		// The address is reused.
		id4, _ := r.RunPodSandbox(ctx, sandboxConfig("d", "uid-4"), "")
		resp, _ = r.PodSandboxStatus(ctx, id4, false)
		if got := resp.Status.Network.GetIp(); got != "10.88.0.2" {
			t.Errorf("reused IP = %q, want 10.88.0.2", got)
		}
		var ids []string
		for _, s := range r.Sandboxes() {
			ids = append(ids, s.ID)
		}
		if diff := cmp.Diff([]string{id2, id3, id4}, ids); diff != "" {
			t.Errorf("Sandboxes (-want +got):\n%s", diff)
		}
	})
}

func TestContainerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx := t.Context()
		t0 := time.Now()
		sc := sandboxConfig("web", "uid-1")
		sid, _ := r.RunPodSandbox(ctx, sc, "")
		cc := containerConfig("app", "sh", "-c", "echo hi; sleep 2; exit 1")
		cc.Annotations = map[string]string{"x": "y"}
		id, err := r.CreateContainer(ctx, sid, cc, sc)
		if err != nil {
			t.Fatal(err)
		}
		st := containerStatus(t, r, id)
		if st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.Metadata.Name != "app" ||
			st.Image.Image != "busybox" || st.ImageRef != imageID("docker.io/library/busybox:latest") ||
			st.Labels[runtime.LabelContainerName] != "app" || st.Annotations["x"] != "y" || st.CreatedAt != t0.UnixNano() {
			t.Errorf("created status = %v", st)
		}
		time.Sleep(time.Second)
		if err := r.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := r.StartContainer(ctx, id); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("second StartContainer: %v, want FailedPrecondition", err)
		}
		st = containerStatus(t, r, id)
		if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt != t0.Add(time.Second).UnixNano() {
			t.Errorf("running status = %v", st)
		}
		time.Sleep(1999 * time.Millisecond)
		if got := containerStatus(t, r, id).State; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("state just before the program ends = %v", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		st = containerStatus(t, r, id)
		if diff := cmp.Diff(exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 1, "Error"}, exitOf(st)); diff != "" {
			t.Errorf("exit (-want +got):\n%s", diff)
		}
		if st.FinishedAt != t0.Add(3*time.Second).UnixNano() {
			t.Errorf("FinishedAt = %v, want start+2s", time.Unix(0, st.FinishedAt).Sub(t0))
		}
		if err := r.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ContainerStatus(ctx, id, false); status.Code(err) != codes.NotFound {
			t.Errorf("ContainerStatus after remove: %v, want NotFound", err)
		}
		if err := r.RemoveContainer(ctx, id); err != nil {
			t.Errorf("RemoveContainer of a removed container: %v", err)
		}
	})
}

func TestProgramsExit(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		after   time.Duration
		want    exitView
	}{
		{"completes", []string{"sh", "-c", "sleep 1.5"}, 1500 * time.Millisecond, exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"}},
		{"true exits at once", []string{"true"}, 0, exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"}},
		{"false exits at once", []string{"false"}, 0, exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 1, "Error"}},
		{"exit code", []string{"sh", "-c", "exit 42"}, 0, exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 42, "Error"}},
		{"sleep runs", []string{"sleep", "3600"}, 3599 * time.Second, exitView{State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
		{"entrypoint runs forever", nil, 1000 * time.Hour, exitView{State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(Options{Images: []string{"busybox"}})
				defer r.Close()
				_, id := runPod(t, r, "uid", tt.command...)
				time.Sleep(tt.after)
				synctest.Wait()
				if diff := cmp.Diff(tt.want, exitOf(containerStatus(t, r, id))); diff != "" {
					t.Errorf("after %v (-want +got):\n%s", tt.after, diff)
				}
			})
		})
	}
}

func TestStopAndExitContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx := t.Context()
		_, id := runPod(t, r, "uid", "sleep", "10")
		if _, ok := r.LastStopTimeout(id); ok {
			t.Error("LastStopTimeout reports a stop before any")
		}
		if err := r.StopContainer(ctx, id, 30); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error"}, exitOf(containerStatus(t, r, id))); diff != "" {
			t.Errorf("after stop (-want +got):\n%s", diff)
		}
		if got, ok := r.LastStopTimeout(id); !ok || got != 30 {
			t.Errorf("LastStopTimeout = %d, %v; want 30, true", got, ok)
		}
		// The program's timer no longer fires.
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := containerStatus(t, r, id).ExitCode; got != 137 {
			t.Errorf("exit code after the program's end = %d, want 137", got)
		}
		if err := r.StopContainer(ctx, id, 5); err != nil {
			t.Errorf("stopping an exited container: %v", err)
		}
		if err := r.StopContainer(ctx, "nope", 5); status.Code(err) != codes.NotFound {
			t.Errorf("StopContainer(unknown) = %v, want NotFound", err)
		}

		_, id2 := runPod(t, r, "uid2", "sleep", "infinity")
		if err := r.ExitContainer(id2, 3, "OOMKilled"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 3, "OOMKilled"}, exitOf(containerStatus(t, r, id2))); diff != "" {
			t.Errorf("after ExitContainer (-want +got):\n%s", diff)
		}
		if err := r.ExitContainer(id2, 0, ""); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("ExitContainer of an exited container = %v, want FailedPrecondition", err)
		}
		if err := r.ExitContainer("nope", 0, ""); status.Code(err) != codes.NotFound {
			t.Errorf("ExitContainer(unknown) = %v, want NotFound", err)
		}
	})
}

func TestSandboxStopsAndRemovesContainers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx := t.Context()
		sid, id := runPod(t, r, "uid", "sleep", "infinity")
		sc := sandboxConfig("pod-uid", "uid")
		created, err := r.CreateContainer(ctx, sid, containerConfig("second"), sc)
		if err != nil {
			t.Fatal(err)
		}
		otherSandbox, other := runPod(t, r, "uid2")

		if err := r.StopPodSandbox(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(exitView{runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error"}, exitOf(containerStatus(t, r, id))); diff != "" {
			t.Errorf("running container after StopPodSandbox (-want +got):\n%s", diff)
		}
		if got := containerStatus(t, r, created).State; got != runtimeapi.ContainerState_CONTAINER_CREATED {
			t.Errorf("created container after StopPodSandbox: %v", got)
		}
		if _, err := r.CreateContainer(ctx, sid, containerConfig("late"), sc); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("CreateContainer in a stopped sandbox = %v, want FailedPrecondition", err)
		}
		if err := r.StartContainer(ctx, created); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("StartContainer in a stopped sandbox = %v, want FailedPrecondition", err)
		}
		if _, err := r.CreateContainer(ctx, "nope", containerConfig("late"), sc); status.Code(err) != codes.NotFound {
			t.Errorf("CreateContainer in an unknown sandbox = %v, want NotFound", err)
		}
		if err := r.RemovePodSandbox(ctx, sid); err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, c := range r.Containers() {
			left = append(left, c.ID)
		}
		if diff := cmp.Diff([]string{other}, left); diff != "" {
			t.Errorf("containers after RemovePodSandbox (-want +got):\n%s", diff)
		}
		if got := containerStatus(t, r, other).State; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container of another sandbox: %v", got)
		}
		_ = otherSandbox
	})
}

func TestListFilters(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	ctx := t.Context()
	s1, c1 := runPod(t, r, "uid1", "sleep", "infinity")
	s2, c2 := runPod(t, r, "uid2", "sleep", "infinity")
	if err := r.ExitContainer(c2, 0, ""); err != nil {
		t.Fatal(err)
	}
	c3, err := r.CreateContainer(ctx, s2, containerConfig("other"), sandboxConfig("pod-uid2", "uid2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StopPodSandbox(ctx, s2); err != nil {
		t.Fatal(err)
	}

	sandboxIDs := func(f *runtimeapi.PodSandboxFilter) []string {
		t.Helper()
		list, err := r.ListPodSandbox(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range list {
			ids = append(ids, s.Id)
		}
		return ids
	}
	containerIDs := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		list, err := r.ListContainers(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list {
			ids = append(ids, c.Id)
		}
		return ids
	}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	sandboxTests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"nil", nil, []string{s1, s2}},
		{"empty", &runtimeapi.PodSandboxFilter{}, []string{s1, s2}},
		{"id", &runtimeapi.PodSandboxFilter{Id: s2}, []string{s2}},
		{"id prefix", &runtimeapi.PodSandboxFilter{Id: s2[:12]}, []string{s2}},
		{"unknown id", &runtimeapi.PodSandboxFilter{Id: "nope"}, nil},
		{"state", &runtimeapi.PodSandboxFilter{State: ready}, []string{s1}},
		{"id and other state", &runtimeapi.PodSandboxFilter{Id: s2, State: ready}, nil},
		{"labels", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runtime.LabelPodUID: "uid2"}}, []string{s2}},
		{"labels no match", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runtime.LabelPodUID: "uid3"}}, nil},
	}
	for _, tt := range sandboxTests {
		t.Run("sandbox/"+tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, sandboxIDs(tt.filter)); diff != "" {
				t.Errorf("ListPodSandbox (-want +got):\n%s", diff)
			}
		})
	}
	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	containerTests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"nil", nil, []string{c1, c2, c3}},
		{"id", &runtimeapi.ContainerFilter{Id: c3}, []string{c3}},
		{"id prefix", &runtimeapi.ContainerFilter{Id: c3[:10]}, []string{c3}},
		{"running", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{c1}},
		{"exited", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, []string{c2}},
		{"created", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{c3}},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: s2}, []string{c2, c3}},
		{"unknown sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "nope"}, nil},
		{"sandbox and state", &runtimeapi.ContainerFilter{PodSandboxId: s2, State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{c3}},
		{"id in other sandbox", &runtimeapi.ContainerFilter{Id: c1, PodSandboxId: s2}, nil},
		{"labels", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{runtime.LabelContainerName: "other"}}, []string{c3}},
	}
	for _, tt := range containerTests {
		t.Run("container/"+tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, containerIDs(tt.filter)); diff != "" {
				t.Errorf("ListContainers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	ctx := t.Context()
	calls := map[string]func() error{
		"StopPodSandbox":   func() error { return r.StopPodSandbox(ctx, "nope") },
		"PodSandboxStatus": func() error { _, err := r.PodSandboxStatus(ctx, "nope", false); return err },
		"StartContainer":   func() error { return r.StartContainer(ctx, "nope") },
		"StopContainer":    func() error { return r.StopContainer(ctx, "nope", 0) },
		"ContainerStatus":  func() error { _, err := r.ContainerStatus(ctx, "nope", false); return err },
		"UpdateContainerResources": func() error {
			return r.UpdateContainerResources(ctx, "nope", &runtimeapi.ContainerResources{})
		},
		"ExecSync": func() error { _, _, err := r.ExecSync(ctx, "nope", []string{"true"}, 0); return err },
		"CreateContainer": func() error {
			_, err := r.CreateContainer(ctx, "nope", containerConfig("c"), nil)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if status.Code(err) != codes.NotFound {
				t.Errorf("%s(unknown) = %v, want a NotFound status", name, err)
			}
			if wrapped := fmt.Errorf("wrap: %w", err); status.Code(wrapped) != codes.NotFound {
				t.Errorf("wrapped error lost its code: %v", wrapped)
			}
		})
	}
}

func TestImages(t *testing.T) {
	r := New(Options{Images: []string{"registry.k8s.io/pause:3.10"}})
	defer r.Close()
	ctx := t.Context()
	sc := sandboxConfig("p", "uid")
	sid, _ := r.RunPodSandbox(ctx, sc, "")
	if _, err := r.CreateContainer(ctx, sid, containerConfig("c"), sc); status.Code(err) != codes.NotFound {
		t.Errorf("CreateContainer with a missing image = %v, want NotFound", err)
	}
	resp, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, false)
	if err != nil || resp.Image != nil {
		t.Errorf("ImageStatus(missing) = %v, %v; want no image, no error", resp, err)
	}
	ref, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"busybox", "busybox:latest", "docker.io/library/busybox:latest", ref} {
		resp, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: name}, false)
		if err != nil || resp.Image.GetId() != ref {
			t.Errorf("ImageStatus(%q) = %v, %v; want image %s", name, resp, err, ref)
		}
	}
	if _, err := r.CreateContainer(ctx, sid, containerConfig("c"), sc); err != nil {
		t.Errorf("CreateContainer after the pull: %v", err)
	}

	r.SetPullable(func(ref string) bool { return ref != "private/app" })
	if _, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "private/app"}, nil, sc); status.Code(err) != codes.NotFound {
		t.Errorf("PullImage(unpullable) = %v, want NotFound", err)
	}
	r.ImageAdd("private/app")
	list, err := r.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, img := range list {
		tags = append(tags, img.RepoTags...)
	}
	want := []string{"registry.k8s.io/pause:3.10", "docker.io/library/busybox:latest", "docker.io/private/app:latest"}
	if diff := cmp.Diff(want, tags); diff != "" {
		t.Errorf("ListImages (-want +got):\n%s", diff)
	}
	if err := r.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}); err != nil {
		t.Errorf("removing a removed image: %v", err)
	}
	list, _ = r.ListImages(ctx, &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	if len(list) != 0 {
		t.Errorf("ListImages(busybox) after removal = %v", list)
	}
}

func TestFaults(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	ctx := t.Context()
	boom := errors.New("boom")

	r.InjectErrorOnce("Version", boom)
	if _, err := r.Version(ctx, "v1"); !errors.Is(err, boom) {
		t.Errorf("first Version after InjectErrorOnce = %v, want boom", err)
	}
	if _, err := r.Version(ctx, "v1"); err != nil {
		t.Errorf("second Version after InjectErrorOnce = %v", err)
	}

	r.InjectError("ListContainers", boom)
	for i := range 3 {
		if _, err := r.ListContainers(ctx, nil); !errors.Is(err, boom) {
			t.Errorf("ListContainers #%d = %v, want boom", i, err)
		}
	}
	r.InjectError("ListContainers", nil)
	if _, err := r.ListContainers(ctx, nil); err != nil {
		t.Errorf("ListContainers after clearing = %v", err)
	}
	if got := r.Calls("ListContainers"); got != 4 {
		t.Errorf("Calls(ListContainers) = %d, want 4", got)
	}
	if got := r.Calls("Version"); got != 2 {
		t.Errorf("Calls(Version) = %d, want 2", got)
	}

	r.SetDown(true)
	if _, err := r.ListPodSandbox(ctx, nil); status.Code(err) != codes.Unavailable {
		t.Errorf("ListPodSandbox while down = %v, want Unavailable", err)
	}
	if _, err := r.Status(ctx, false); status.Code(err) != codes.Unavailable {
		t.Errorf("Status while down = %v, want Unavailable", err)
	}
	r.SetDown(false)
	if _, err := r.ListPodSandbox(ctx, nil); err != nil {
		t.Errorf("ListPodSandbox after down = %v", err)
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Error("InjectError with an unknown method did not panic")
			}
		}()
		r.InjectError("ListContainer", boom)
	}()
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Latency: 50 * time.Millisecond})
		defer r.Close()
		start := time.Now()
		if _, err := r.Version(t.Context(), "v1"); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Errorf("call took %v, want 50ms", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err := r.ListContainers(ctx, nil)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("ListContainers with a short deadline = %v, want DeadlineExceeded", err)
		}
		if got := time.Since(start); got != 10*time.Millisecond {
			t.Errorf("call gave up after %v, want 10ms", got)
		}
	})
}

func TestStatusConditions(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	r.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni not initialised")
	resp, err := r.Status(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	type cond struct {
		Type   string
		Status bool
		Reason string
	}
	var got []cond
	for _, c := range resp.Status.Conditions {
		got = append(got, cond{c.Type, c.Status, c.Reason})
	}
	want := []cond{{runtimeapi.RuntimeReady, true, ""}, {runtimeapi.NetworkReady, false, "NetworkPluginNotReady"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

func TestExecSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx := t.Context()
		sid, id := runPod(t, r, "uid", "sleep", "infinity")
		if out, _, err := r.ExecSync(ctx, id, []string{"cat", "/ready"}, time.Second); err != nil || len(out) != 0 {
			t.Errorf("default ExecSync = %q, %v", out, err)
		}
		r.SetExecHandler(func(containerID string, cmd []string) ([]byte, []byte, int32) {
			if containerID != id {
				t.Errorf("handler got container %s", containerID)
			}
			if cmd[0] == "fail" {
				return []byte("out"), []byte("bad"), 3
			}
			return []byte("ok"), nil, 0
		})
		if out, _, err := r.ExecSync(ctx, id, []string{"check"}, time.Second); err != nil || string(out) != "ok" {
			t.Errorf("ExecSync(check) = %q, %v", out, err)
		}
		out, stderr, err := r.ExecSync(ctx, id, []string{"fail"}, time.Second)
		var exitErr utilexec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 || string(out) != "out" || string(stderr) != "bad" {
			t.Errorf("ExecSync(fail) = %q, %q, %v; want an ExitError with status 3", out, stderr, err)
		}
		created, _ := r.CreateContainer(ctx, sid, containerConfig("c2"), sandboxConfig("pod-uid", "uid"))
		if _, _, err := r.ExecSync(ctx, created, []string{"check"}, time.Second); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("ExecSync in a created container = %v, want FailedPrecondition", err)
		}
	})
}

func TestUpdateContainerResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		_, id := runPod(t, r, "uid", "sleep", "infinity")
		before := containerStatus(t, r, id)
		res := &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512}}
		if err := r.UpdateContainerResources(t.Context(), id, res); err != nil {
			t.Fatal(err)
		}
		res.Linux.CpuShares = 1 // the runtime keeps its own copy
		if got := containerStatus(t, r, id).GetResources().GetLinux().GetCpuShares(); got != 512 {
			t.Errorf("CpuShares = %d, want 512", got)
		}
		if before.Resources != nil {
			t.Errorf("a status returned before the update changed: %v", before.Resources)
		}
	})
}

func TestContainerEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx, cancel := context.WithCancel(t.Context())
		ch := make(chan *runtimeapi.ContainerEventResponse, 100)
		connected := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- r.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(connected) })
		}()
		<-connected

		sid, id := runPod(t, r, "uid", "sh", "-c", "sleep 1; exit 2")
		time.Sleep(time.Second)
		synctest.Wait()
		if err := r.RemovePodSandbox(ctx, sid); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		type ev struct {
			ID   string
			Type runtimeapi.ContainerEventType
		}
		want := []ev{
			{sid, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
			{sid, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
			{id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
			{id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
			{id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
			{sid, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
			{id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
			{sid, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
		}
		var got []ev
		var stopped *runtimeapi.ContainerEventResponse
		for len(ch) > 0 {
			e := <-ch
			got = append(got, ev{e.ContainerId, e.ContainerEventType})
			if e.ContainerId == id && e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				stopped = e
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if stopped == nil || stopped.PodSandboxStatus.GetId() != sid || len(stopped.ContainersStatuses) != 1 ||
			stopped.ContainersStatuses[0].ExitCode != 2 {
			t.Errorf("STOPPED event = %v; want the sandbox status and the container's exit code", stopped)
		}
		cancel()
		if err := <-done; status.Code(err) != codes.Canceled {
			t.Errorf("GetContainerEvents after cancel = %v, want Canceled", err)
		}
	})
}

func TestContainerEventsEnd(t *testing.T) {
	tests := []struct {
		name string
		end  func(r *Runtime)
		want codes.Code
	}{
		{"down", func(r *Runtime) { r.SetDown(true) }, codes.Unavailable},
		{"close", func(r *Runtime) { r.Close() }, codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(Options{})
				defer r.Close()
				ch := make(chan *runtimeapi.ContainerEventResponse) // nobody reads
				done := make(chan error, 1)
				go func() { done <- r.GetContainerEvents(t.Context(), ch, nil) }()
				synctest.Wait()
				tt.end(r)
				if err := <-done; status.Code(err) != tt.want {
					t.Errorf("GetContainerEvents = %v, want %v", err, tt.want)
				}
			})
		})
	}
	t.Run("unimplemented", func(t *testing.T) {
		r := New(Options{})
		defer r.Close()
		r.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "no events"))
		err := r.GetContainerEvents(t.Context(), make(chan *runtimeapi.ContainerEventResponse), nil)
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("GetContainerEvents = %v, want Unimplemented", err)
		}
	})
}

// TestContainerEventsSlowSubscriber: a subscriber that falls behind
// keeps its stream and every event; the calls that send events wait for
// it once eventQueueLimit events wait, as containerd's do, and go on when
// it reads, or when its stream ends.
func TestContainerEventsSlowSubscriber(t *testing.T) {
	for _, end := range []bool{false, true} {
		t.Run(fmt.Sprintf("end=%v", end), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(Options{})
				defer r.Close()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				ch := make(chan *runtimeapi.ContainerEventResponse) // read later
				done := make(chan error, 1)
				go func() { done <- r.GetContainerEvents(ctx, ch, nil) }()
				synctest.Wait()
				// Each sandbox sends two events (CREATED, STARTED); the
				// subscriber takes its first queued events into the send it
				// blocks on.
				sandboxes := eventQueueLimit
				ran := make(chan int, 1)
				go func() {
					n := 0
					for range sandboxes {
						if _, err := r.RunPodSandbox(t.Context(), sandboxConfig("p", "u"), ""); err != nil {
							t.Error(err)
						}
						n++
					}
					ran <- n
				}()
				synctest.Wait()
				select {
				case n := <-ran:
					t.Fatalf("%d sandboxes ran with nobody reading the events, want the calls to wait", n)
				default:
				}
				if end {
					cancel()
					if err := <-done; status.Code(err) != codes.Canceled {
						t.Errorf("GetContainerEvents = %v, want Canceled", err)
					}
					if n := <-ran; n != sandboxes {
						t.Errorf("%d sandboxes ran after the stream ended, want %d", n, sandboxes)
					}
					return
				}
				got := 0
				for got < 2*sandboxes {
					select {
					case <-ch:
						got++
					case err := <-done:
						t.Fatalf("stream ended after %d events: %v", got, err)
					}
				}
				if n := <-ran; n != sandboxes {
					t.Errorf("%d sandboxes ran, want %d", n, sandboxes)
				}
				select {
				case err := <-done:
					t.Fatalf("stream ended: %v", err)
				default:
				}
			})
		})
	}
}

// TestWaitSubscribers: WaitSubscribers returns once the streams have
// subscribed, and an event emitted right after reaches them; it follows
// streams that end, and ends with its context.
func TestWaitSubscribers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{})
		defer r.Close()
		waited := make(chan error, 1)
		go func() { waited <- r.WaitSubscribers(t.Context(), 2) }()
		ch := make(chan *runtimeapi.ContainerEventResponse, 4)
		ctx1, cancel1 := context.WithCancel(t.Context())
		done1 := make(chan error, 1)
		go func() { done1 <- r.GetContainerEvents(ctx1, ch, nil) }()
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("WaitSubscribers(2) = %v with one stream", err)
		default:
		}
		done2 := make(chan error, 1)
		go func() { done2 <- r.GetContainerEvents(t.Context(), ch, nil) }()
		if err := <-waited; err != nil {
			t.Fatalf("WaitSubscribers(2) = %v", err)
		}
		if _, err := r.RunPodSandbox(t.Context(), sandboxConfig("p", "u"), ""); err != nil {
			t.Fatal(err)
		}
		for range 4 { // CREATED and STARTED, to each stream
			<-ch
		}

		cancel1()
		<-done1
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := r.WaitSubscribers(ctx, 2); err != context.DeadlineExceeded {
			t.Errorf("WaitSubscribers(2) with one stream left = %v, want DeadlineExceeded", err)
		}
		if err := r.WaitSubscribers(t.Context(), 1); err != nil {
			t.Errorf("WaitSubscribers(1) = %v", err)
		}
		r.SetDown(true)
		<-done2
	})
}

func TestCloseStopsTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		_, id := runPod(t, r, "uid", "sleep", "1")
		r.Close()
		r.Close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := containerStatus(t, r, id).State; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("state after Close and the program's end = %v, want running", got)
		}
	})
}

func TestReturnedObjectsAreNotChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Images: []string{"busybox"}})
		defer r.Close()
		ctx := t.Context()
		_, id := runPod(t, r, "uid", "sleep", "1")
		list, _ := r.ListContainers(ctx, nil)
		sandboxes, _ := r.ListPodSandbox(ctx, nil)
		time.Sleep(time.Second)
		synctest.Wait()
		_ = r.StopPodSandbox(ctx, sandboxes[0].Id)
		if list[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || sandboxes[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("listed objects changed after the fact: %v, %v", list[0].State, sandboxes[0].State)
		}
		list, _ = r.ListContainers(ctx, nil)
		if list[0].Id != id || list[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("new list = %v", list[0])
		}
	})
}

// TestConcurrentUse hammers one runtime from many goroutines; run with
// -race.
func TestConcurrentUse(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				uid := fmt.Sprintf("uid-%d-%d", w, i)
				sc := sandboxConfig(uid, uid)
				sid, err := r.RunPodSandbox(ctx, sc, "")
				if err != nil {
					t.Error(err)
					return
				}
				id, err := r.CreateContainer(ctx, sid, containerConfig("c", "sh", "-c", "sleep 0.001; exit 1"), sc)
				if err != nil {
					t.Error(err)
					return
				}
				if err := r.StartContainer(ctx, id); err != nil {
					t.Error(err)
				}
				if i%3 == 0 {
					_ = r.StopContainer(ctx, id, 1)
				}
				if i%2 == 0 {
					_ = r.RemovePodSandbox(ctx, sid)
				}
			}
		})
	}
	events := make(chan *runtimeapi.ContainerEventResponse, 16)
	evCtx, cancel := context.WithCancel(ctx)
	wg.Go(func() { _ = r.GetContainerEvents(evCtx, events, nil) })
	wg.Go(func() {
		for {
			select {
			case <-events:
			case <-evCtx.Done():
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				sandboxes, _ := r.ListPodSandbox(ctx, nil)
				containers, _ := r.ListContainers(ctx, nil)
				for _, c := range containers {
					_, _ = r.ContainerStatus(ctx, c.Id, false)
					_ = c.State
				}
				for _, s := range sandboxes {
					_, _ = r.PodSandboxStatus(ctx, s.Id, false)
				}
				_ = r.Containers()
				_ = r.Calls("ListContainers")
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
	if got, want := len(r.Sandboxes()), 8*25; got != want {
		t.Errorf("%d sandboxes left, want %d", got, want)
	}
}

func TestBoundedMemory(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	ctx := t.Context()
	for range 1000 {
		sc := sandboxConfig("p", "u")
		sid, _ := r.RunPodSandbox(ctx, sc, "")
		_, _ = r.CreateContainer(ctx, sid, containerConfig("c"), sc)
		_ = r.RemovePodSandbox(ctx, sid)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.sandboxes) != 0 || len(r.containers) != 0 || len(r.sandboxList) > 32 || len(r.ctrList) > 32 || len(r.ips.free) > 1 {
		t.Errorf("after removing everything: %d sandboxes, %d containers, lists %d/%d, %d free IPs",
			len(r.sandboxes), len(r.containers), len(r.sandboxList), len(r.ctrList), len(r.ips.free))
	}
}

// TestRoomGivenBack churns many pods in flight at once, then removes them
// all: the runtime gives back the room its maps, lists and address pool
// grew to, rather than hold it for as long as it lives.
func TestRoomGivenBack(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	ctx := t.Context()
	churn := func(n int) {
		t.Helper()
		ids := make([]string, n)
		for i := range ids {
			uid := fmt.Sprintf("uid-%d", i)
			sc := sandboxConfig("pod-"+uid, uid)
			sid, err := r.RunPodSandbox(ctx, sc, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.CreateContainer(ctx, sid, containerConfig("c"), sc); err != nil {
				t.Fatal(err)
			}
			ids[i] = sid
		}
		for _, id := range ids {
			if err := r.RemovePodSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	churn(10) // what the first objects make once
	before := leakcheck.LiveHeap()
	const pods = 10000
	churn(pods)
	// Some 40 bytes a pod in each of the two maps by ID and the two by
	// pod UID, 8 in each list: over 1 MiB kept.
	if after := leakcheck.LiveHeap(); after > before+128<<10 {
		t.Errorf("live heap %d KiB after %d pods came and went, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
}

func TestCRIAdapter(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	var svc cri.RuntimeService = r.CRI()
	if _, err := svc.RunPodSandbox(t.Context(), sandboxConfig("p", "u"), ""); err != nil {
		t.Fatal(err)
	}
	if got := len(r.Sandboxes()); got != 1 {
		t.Errorf("the adapter did not reach the runtime: %d sandboxes", got)
	}
	if _, err := svc.ListContainerStats(t.Context(), nil); status.Code(err) != codes.Unimplemented {
		t.Errorf("ListContainerStats = %v, want Unimplemented", err)
	}
	_, id := runPod(t, r, "u2", "sleep", "1")
	if err := svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Close(ctx) closed the Runtime: the program's timer is stopped.
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.closed || r.containers[id].timer != nil {
		t.Error("Close(ctx) did not close the runtime")
	}
}

// TestListByPodUID checks the pod index behind label-selected lists: the
// objects of one pod, in creation order, and nothing once removed.
func TestListByPodUID(t *testing.T) {
	r := New(Options{Images: []string{"busybox"}})
	defer r.Close()
	ctx := t.Context()
	withUID := func(name, uid string) *runtimeapi.ContainerConfig {
		c := containerConfig(name, "sleep", "infinity")
		c.Labels[runtime.LabelPodUID] = uid
		return c
	}
	sc := sandboxConfig("pod-a", "a")
	sa, err := r.RunPodSandbox(ctx, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.RunPodSandbox(ctx, sandboxConfig("pod-b", "b"), "")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range []string{"x", "y"} {
		id, err := r.CreateContainer(ctx, sa, withUID(name, "a"), sc)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if _, err := r.CreateContainer(ctx, sb, withUID("z", "b"), sandboxConfig("pod-b", "b")); err != nil {
		t.Fatal(err)
	}
	byUID := map[string]string{runtime.LabelPodUID: "a"}
	list := func() (sandboxes, containers []string) {
		ss, err := r.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: byUID})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			sandboxes = append(sandboxes, s.Id)
		}
		cs, err := r.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: byUID})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			containers = append(containers, c.Id)
		}
		return sandboxes, containers
	}
	gotS, gotC := list()
	if diff := cmp.Diff([]string{sa}, gotS); diff != "" {
		t.Errorf("sandboxes of pod a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, gotC); diff != "" {
		t.Errorf("containers of pod a (-want +got):\n%s", diff)
	}
	if err := r.RemovePodSandbox(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if gotS, gotC := list(); len(gotS)+len(gotC) != 0 {
		t.Errorf("after removal: sandboxes %v, containers %v, want none", gotS, gotC)
	}
}
