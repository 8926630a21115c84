package podruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodekit/nodekit/runtime"
)

func TestSyncPodCreatesSandboxAndContainers(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("web", "a", "b")
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"note": "x"}
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "PLAIN", Value: "v"},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "REF", Value: "$(PLAIN)-$(POD_NAME)"},
	}
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}

	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	wantCalls := []string{"RunPodSandbox", "CreateContainer", "StartContainer", "CreateContainer", "StartContainer"}
	if diff := cmp.Diff(wantCalls, f.calls()); diff != "" {
		t.Errorf("runtime calls (-want +got):\n%s", diff)
	}

	f.rs.Lock()
	if len(f.rs.Sandboxes) != 1 {
		t.Fatalf("sandboxes = %d, want 1", len(f.rs.Sandboxes))
	}
	var sb *critest.FakePodSandbox
	for _, s := range f.rs.Sandboxes {
		sb = s
	}
	f.rs.Unlock()
	wantLabels := map[string]string{"app": "web", runtime.LabelPodName: "web", runtime.LabelPodNamespace: "default", runtime.LabelPodUID: "web-uid"}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("sandbox labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"note": "x"}, sb.Annotations); diff != "" {
		t.Errorf("sandbox annotations (-want +got):\n%s", diff)
	}
	if md := sb.Metadata; md.Name != "web" || md.Namespace != "default" || md.Uid != "web-uid" || md.Attempt != 0 {
		t.Errorf("sandbox metadata = %v", md)
	}

	a := f.container(pod, "a")
	wantCLabels := map[string]string{
		runtime.LabelPodName: "web", runtime.LabelPodNamespace: "default", runtime.LabelPodUID: "web-uid",
		runtime.LabelContainerName: "a", runtime.LabelContainerHash: runtime.HashContainer(&pod.Spec.Containers[0]),
	}
	if diff := cmp.Diff(wantCLabels, a.Labels); diff != "" {
		t.Errorf("container labels (-want +got):\n%s", diff)
	}
	wantAnn := map[string]string{
		runtime.AnnotationRestartCount: "0", annotationPodTerminationGracePeriod: "30",
		annotationTerminationMessagePath: "", annotationTerminationMessagePolicy: "",
		annotationContainerIndex: "0", runtime.AnnotationContainerType: runtime.ContainerTypeRegular,
		annotationContainerPorts: `[{"hostPort":8080,"containerPort":80,"protocol":"TCP"}]`,
	}
	if diff := cmp.Diff(wantAnn, a.Annotations); diff != "" {
		t.Errorf("container annotations (-want +got):\n%s", diff)
	}
	if a.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container a state = %v, want running", a.State)
	}
	if b := f.container(pod, "b"); b.Annotations[annotationContainerIndex] != "1" {
		t.Errorf("container b index = %q, want 1", b.Annotations[annotationContainerIndex])
	}

	scfg := f.rec.sandboxConfigs[0]
	if want := filepath.Join(f.dir, "default_web_web-uid"); scfg.LogDirectory != want {
		t.Errorf("sandbox log directory = %q, want %q", scfg.LogDirectory, want)
	}
	if scfg.Hostname != "web" {
		t.Errorf("hostname = %q, want web", scfg.Hostname)
	}
	if got := scfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork(); got != runtimeapi.NamespaceMode_POD {
		t.Errorf("network namespace = %v, want POD", got)
	}
	if len(scfg.PortMappings) != 1 || scfg.PortMappings[0].ContainerPort != 80 || scfg.PortMappings[0].HostPort != 8080 {
		t.Errorf("port mappings = %v", scfg.PortMappings)
	}
	cfg := f.rec.lastContainerConfig("a")
	if cfg.LogPath != "a/0.log" {
		t.Errorf("log path = %q, want a/0.log", cfg.LogPath)
	}
	if cfg.Metadata.Attempt != 0 {
		t.Errorf("attempt = %d, want 0", cfg.Metadata.Attempt)
	}
	env := map[string]string{}
	for _, kv := range cfg.Envs {
		env[kv.Key] = string(kv.Value)
	}
	wantEnv := map[string]string{"PLAIN": "v", "POD_NAME": "web", "POD_IP": critest.FakePodSandboxIPs[0], "NODE": "node1", "REF": "v-web"}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if cfg.Image.UserSpecifiedImage != "busybox:1.36" {
		t.Errorf("image = %v", cfg.Image)
	}
}

func TestSyncPodHostNetwork(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("hn", "a")
	pod.Spec.HostNetwork = true
	pod.Spec.HostPID = true
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"example.com"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	scfg := f.rec.sandboxConfigs[0]
	if scfg.Hostname != "" {
		t.Errorf("hostname = %q, want empty for the host network", scfg.Hostname)
	}
	ns := scfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetNetwork() != runtimeapi.NamespaceMode_NODE || ns.GetPid() != runtimeapi.NamespaceMode_NODE || ns.GetIpc() != runtimeapi.NamespaceMode_POD {
		t.Errorf("namespace options = %v", ns)
	}
	if d := scfg.DnsConfig; d == nil || d.Servers[0] != "1.1.1.1" || d.Searches[0] != "example.com" || d.Options[0] != "ndots:2" {
		t.Errorf("dns config = %v", d)
	}
	// The runtime records the namespace options: a second sync keeps the sandbox.
	f.calls()
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); len(got) != 0 {
		t.Errorf("second sync made calls %v", got)
	}
}

func TestSyncPodInitContainersInOrder(t *testing.T) {
	f := newFakes(t, Options{})
	pod := withInit(testPod("init", "a"), "i1", "i2")
	step := func(wantStarted []string) {
		t.Helper()
		res := f.sync(t, pod)
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		var started []string
		for _, r := range res.Results {
			if r.Action == ActionStartContainer {
				started = append(started, r.Target)
			}
		}
		if diff := cmp.Diff(wantStarted, started); diff != "" {
			t.Errorf("started (-want +got):\n%s", diff)
		}
	}
	step([]string{"i1"})
	step(nil) // i1 still running
	f.exit(pod, "i1", 0)
	step([]string{"i2"})
	if got := f.container(pod, "i2").Annotations[runtime.AnnotationContainerType]; got != runtime.ContainerTypeInit {
		t.Errorf("i2 type = %q, want init", got)
	}
	f.exit(pod, "i2", 0)
	step([]string{"a"})
	step(nil)
}

func TestSyncPodInitContainerFailure(t *testing.T) {
	t.Run("Never fails the pod", func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := withPolicy(withInit(testPod("initfail", "a"), "i1"), v1.RestartPolicyNever)
		f.sync(t, pod)
		f.exit(pod, "i1", 1)
		f.calls()
		res := f.sync(t, pod)
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"StopPodSandbox"}, f.calls()); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		if n := f.countContainers(pod, "a"); n != 0 {
			t.Errorf("app container created %d times", n)
		}
		// The pod fails: its init container exited 1 and is not restarted.
		st := f.status(t, pod)
		if i1 := st.FindContainerStatusByName("i1"); i1 == nil || i1.ExitCode != 1 || runtime.ShouldContainerBeRestarted(&pod.Spec.InitContainers[0], pod, st) {
			t.Errorf("init container = %+v, want exited 1 and not to be restarted", i1)
		}
	})
	t.Run("OnFailure restarts it", func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := withPolicy(withInit(testPod("initretry", "a"), "i1"), v1.RestartPolicyOnFailure)
		f.sync(t, pod)
		f.exit(pod, "i1", 1)
		f.calls()
		if err := f.sync(t, pod).Err(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"CreateContainer", "StartContainer"}, f.calls()); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		if got := f.container(pod, "i1").Annotations[runtime.AnnotationRestartCount]; got != "1" {
			t.Errorf("restart count = %s, want 1", got)
		}
	})
}

func TestSyncPodIsIdempotent(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("idem", "a")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	f.calls()
	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); len(got) != 0 {
		t.Errorf("second sync made calls %v, want none", got)
	}
	if len(res.Results) != 0 {
		t.Errorf("second sync results = %v, want none", res.Results)
	}
}

// startResult returns the StartContainer result of the container.
func startResult(res SyncResult, name string) ActionResult {
	for _, r := range res.Results {
		if r.Action == ActionStartContainer && r.Target == name {
			return r
		}
	}
	return ActionResult{}
}

func startedNames(res SyncResult) []string {
	var out []string
	for _, r := range res.Results {
		if r.Action == ActionStartContainer && r.Err == nil {
			out = append(out, r.Target)
		}
	}
	return out
}

func TestSyncPodRestartBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := testPod("crash", "a")
		if err := f.sync(t, pod).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		// The first exit restarts at once.
		f.exit(pod, "a", 1)
		if got := startedNames(f.sync(t, pod)); len(got) != 1 {
			t.Fatalf("first restart: started %v", got)
		}
		restarts := 1
		for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
			160 * time.Second, 300 * time.Second, 300 * time.Second} {
			time.Sleep(time.Second)
			f.exit(pod, "a", 1)
			finished := time.Now()
			res := f.sync(t, pod)
			if !errors.Is(res.Err(), ErrCrashLoopBackOff) || !res.OnlyBackOff() {
				t.Fatalf("after exit: err = %v, want CrashLoopBackOff", res.Err())
			}
			wantMsg := fmt.Sprintf("back-off %s restarting failed container=a pod=crash_default(crash-uid)", wait)
			if got := startResult(res, "a").Message; got != wantMsg {
				t.Errorf("message = %q, want %q", got, wantMsg)
			}
			if got, want := res.NextRetry(), finished.Add(wait); !got.Equal(want) {
				t.Errorf("NextRetry = %v, want %v", got, want)
			}
			if r, msg, ok := f.m.WaitingReason(pod.UID, "a"); !ok || r != "CrashLoopBackOff" || msg != wantMsg {
				t.Errorf("waiting reason = %q %q %v, want CrashLoopBackOff", r, msg, ok)
			}
			if a := f.status(t, pod).FindContainerStatusByName("a"); a == nil || a.State != runtime.ContainerStateExited {
				t.Errorf("newest instance while backing off = %+v, want exited", a)
			}
			time.Sleep(wait - time.Second)
			if got := startedNames(f.sync(t, pod)); len(got) != 0 {
				t.Fatalf("started %v one second before the back-off of %v ended", got, wait)
			}
			time.Sleep(time.Second)
			if got := startedNames(f.sync(t, pod)); len(got) != 1 {
				t.Fatalf("not restarted after the back-off of %v", wait)
			}
			restarts++
			if got := f.container(pod, "a").Annotations[runtime.AnnotationRestartCount]; got != strconv.Itoa(restarts) {
				t.Errorf("restart count = %s, want %d", got, restarts)
			}
			if n := f.countContainers(pod, "a"); n > 2 {
				t.Errorf("%d instances of the container kept, want at most 2", n)
			}
			if a := f.status(t, pod).FindContainerStatusByName("a"); a == nil || a.State != runtime.ContainerStateRunning || a.RestartCount != restarts {
				t.Errorf("status after restart = %+v", a)
			}
			if r, _, ok := f.m.WaitingReason(pod.UID, "a"); ok {
				t.Errorf("waiting reason %q kept after a restart", r)
			}
		}

		// A container that ran for longer than Reset restarts at once, and
		// its next crash waits the initial 10s again.
		time.Sleep(11 * time.Minute)
		f.exit(pod, "a", 1)
		if got := startedNames(f.sync(t, pod)); len(got) != 1 {
			t.Fatalf("not restarted at once after a long run: %v", got)
		}
		time.Sleep(time.Second)
		f.exit(pod, "a", 1)
		res := f.sync(t, pod)
		if want := "back-off 10s restarting failed container=a pod=crash_default(crash-uid)"; startResult(res, "a").Message != want {
			t.Errorf("after reset: results %+v, want message %q", res.Results, want)
		}
	})
}

func TestSyncPodReplacesChangedContainer(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("hash", "a", "b")
	f.sync(t, pod)
	oldID := f.container(pod, "a").Id
	f.calls()
	f.rec.stopTimeouts()

	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Image = "nginx:1.25"
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"StopContainer", "CreateContainer", "StartContainer"}, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{oldID: 30}, f.rec.stopTimeouts()); diff != "" {
		t.Errorf("stopped (-want +got):\n%s", diff)
	}
	c := f.container(pod, "a")
	if c.Id == oldID || c.Labels[runtime.LabelContainerHash] != runtime.HashContainer(&pod.Spec.Containers[0]) || c.Annotations[runtime.AnnotationRestartCount] != "1" {
		t.Errorf("replacement = id %s labels %v annotations %v", c.Id, c.Labels, c.Annotations)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("replacement state = %v", c.State)
	}
}

func TestSyncPodKillsRemovedContainer(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("removed", "a", "b")
	f.sync(t, pod)
	bID := f.container(pod, "b").Id
	f.calls()
	f.rec.stopTimeouts()

	pod = pod.DeepCopy()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"StopContainer"}, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{bID: 30}, f.rec.stopTimeouts()); diff != "" {
		t.Errorf("stopped (-want +got):\n%s", diff)
	}
	// The next sync removes the exited container that is no longer in the spec.
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"RemoveContainer"}, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if n := f.countContainers(pod, "b"); n != 0 {
		t.Errorf("removed container still has %d instances", n)
	}
}

func TestSyncPodRestartCountSurvivesManagerRestart(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("survive", "a")
	f.sync(t, pod)
	f.exit(pod, "a", 1)
	f.sync(t, pod) // restart 1
	f.exit(pod, "a", 1)
	f.age(pod, "a", 10*time.Second) // past the back-off the new manager gives it

	m2, err := New(f.rec, f.is, Options{PodLogsDir: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m2.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.SyncPod(t.Context(), pod, st).Err(); err != nil {
		t.Fatal(err)
	}
	if got := f.container(pod, "a").Annotations[runtime.AnnotationRestartCount]; got != "2" {
		t.Errorf("restart count after a new manager = %s, want 2", got)
	}
	if got := f.rec.lastContainerConfig("a").LogPath; got != "a/2.log" {
		t.Errorf("log path = %s, want a/2.log", got)
	}
}

func TestSyncPodRestartCountFromLogDir(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("logs", "a")
	dir := filepath.Join(runtime.PodLogsDirectory(f.dir, pod.Namespace, pod.Name, pod.UID), "a")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0.log", "4.log", "junk"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.sync(t, pod)
	if got := f.rec.lastContainerConfig("a").LogPath; got != "a/5.log" {
		t.Errorf("log path = %s, want a/5.log (the runtime forgot the earlier instances)", got)
	}
}

func TestSyncPodImagePullPolicy(t *testing.T) {
	tests := []struct {
		name      string
		image     string
		policy    v1.PullPolicy
		wantCalls []string
		wantErr   error
	}{
		{"Always pulls a present image", "busybox:1.36", v1.PullAlways, []string{"PullImage"}, nil},
		{"IfNotPresent uses a present image", "busybox:1.36", v1.PullIfNotPresent, []string{"ImageStatus"}, nil},
		{"IfNotPresent pulls an absent image", "other:1", v1.PullIfNotPresent, []string{"ImageStatus", "PullImage"}, nil},
		{"Never fails on an absent image", "other:1", v1.PullNever, []string{"ImageStatus"}, ErrImageNeverPull},
		{"Never uses a present image", "busybox:1.36", v1.PullNever, []string{"ImageStatus"}, nil},
		{"no policy and latest tag pulls", "busybox:latest", "", []string{"PullImage"}, nil},
		{"no policy and a tag checks first", "busybox:1.36", "", []string{"ImageStatus"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, Options{})
			pod := testPod("img", "a")
			pod.Spec.Containers[0].Image = tt.image
			pod.Spec.Containers[0].ImagePullPolicy = tt.policy
			f.is.Called = nil
			res := f.sync(t, pod)
			if tt.wantErr == nil && res.Err() != nil || tt.wantErr != nil && !errors.Is(res.Err(), tt.wantErr) {
				t.Errorf("err = %v, want %v", res.Err(), tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantCalls, f.is.Called); diff != "" {
				t.Errorf("image calls (-want +got):\n%s", diff)
			}
			created := f.countContainers(pod, "a") == 1
			if created != (tt.wantErr == nil) {
				t.Errorf("container created = %v", created)
			}
		})
	}
}

func TestSyncPodImagePullBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := testPod("pull", "a")
		pod.Spec.Containers[0].Image = "missing:1"
		waiting := func() *v1.ContainerStateWaiting {
			r, msg, ok := f.m.WaitingReason(pod.UID, "a")
			if !ok {
				return nil
			}
			return &v1.ContainerStateWaiting{Reason: r, Message: msg}
		}
		pulls := func() int {
			n := 0
			for _, c := range f.is.Called {
				if c == "PullImage" {
					n++
				}
			}
			f.is.Called = nil
			return n
		}

		f.is.InjectError("PullImage", errors.New("registry down"))
		res := f.sync(t, pod)
		if !errors.Is(res.Err(), ErrImagePull) || res.OnlyBackOff() {
			t.Fatalf("err = %v, want ErrImagePull", res.Err())
		}
		if w := waiting(); w == nil || w.Reason != "ErrImagePull" || w.Message != `Failed to pull image "missing:1": registry down` {
			t.Errorf("waiting = %+v", w)
		}
		if pulls() != 1 {
			t.Error("no pull")
		}
		for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
			res = f.sync(t, pod)
			if !errors.Is(res.Err(), ErrImagePullBackOff) || !res.OnlyBackOff() {
				t.Fatalf("err = %v, want ImagePullBackOff", res.Err())
			}
			if got, want := res.NextRetry(), time.Now().Add(wait); !got.Equal(want) {
				t.Errorf("NextRetry = %v, want %v", got, want)
			}
			if w := waiting(); w == nil || w.Reason != "ImagePullBackOff" || w.Message != `Back-off pulling image "missing:1"` {
				t.Errorf("waiting = %+v", w)
			}
			time.Sleep(wait - time.Second)
			if f.sync(t, pod); pulls() != 0 {
				t.Fatalf("pulled before the back-off of %v ended", wait)
			}
			time.Sleep(time.Second)
			if wait == 10*time.Second {
				f.is.InjectError("PullImage", errors.New("registry down"))
			}
			res = f.sync(t, pod)
			if pulls() != 1 {
				t.Fatalf("no pull after the back-off of %v", wait)
			}
		}
		if err := res.Err(); err != nil {
			t.Fatalf("final pull: %v", err)
		}
		if a := f.status(t, pod).FindContainerStatusByName("a"); a == nil || a.State != runtime.ContainerStateRunning {
			t.Errorf("state after a good pull = %+v, want running", a)
		}
		if w := waiting(); w != nil {
			t.Errorf("waiting reason after a good pull = %+v, want none (the reason is cleared)", w)
		}
	})
}

func TestSyncPodFailuresRecordReasons(t *testing.T) {
	tests := []struct {
		name     string
		inject   string
		setup    func(pod *v1.Pod)
		wantErr  error
		wantWait string
	}{
		{name: "create container fails", inject: "CreateContainer", wantErr: ErrCreateContainer, wantWait: "CreateContainerError"},
		{name: "start container fails", inject: "StartContainer", wantErr: ErrRunContainer, wantWait: "RunContainerError"},
		{name: "unresolvable env", setup: func(pod *v1.Pod) {
			pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}}}
		}, wantErr: ErrCreateContainerConfig, wantWait: "CreateContainerConfigError"},
		{name: "volume not prepared", setup: func(pod *v1.Pod) {
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, wantErr: ErrCreateContainerConfig, wantWait: "CreateContainerConfigError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, Options{})
			pod := testPod("fail", "a")
			if tt.setup != nil {
				tt.setup(pod)
			}
			if tt.inject != "" {
				f.rs.InjectError(tt.inject, errors.New("boom"))
			}
			res := f.sync(t, pod)
			if !errors.Is(res.Err(), tt.wantErr) {
				t.Fatalf("err = %v, want %v", res.Err(), tt.wantErr)
			}
			if got := Reason(res.Err()); got != tt.wantWait {
				t.Errorf("Reason = %q, want %q", got, tt.wantWait)
			}
			if r, msg, ok := f.m.WaitingReason(pod.UID, "a"); !ok || r != tt.wantWait || msg == "" {
				t.Errorf("waiting = %q %q %v, want reason %s", r, msg, ok, tt.wantWait)
			}
			f.m.Forget(pod.UID)
			if r, _, ok := f.m.WaitingReason(pod.UID, "a"); ok {
				t.Errorf("reason %q kept after Forget", r)
			}
		})
	}
}

func TestSyncPodSandboxFailure(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("sbfail", "a")
	f.rs.InjectError("RunPodSandbox", errors.New("cni failed"))
	res := f.sync(t, pod)
	if !errors.Is(res.Err(), ErrCreatePodSandbox) {
		t.Fatalf("err = %v, want ErrCreatePodSandbox", res.Err())
	}
	if n := f.countContainers(pod, "a"); n != 0 {
		t.Errorf("container created without a sandbox")
	}
	// The next sync tries again.
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if n := f.countContainers(pod, "a"); n != 1 {
		t.Errorf("containers = %d after the retry, want 1", n)
	}
}

func TestSyncPodVolumes(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("vol", "a")
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "conf", MountPath: "/etc/app", SubPath: "app", ReadOnly: true},
	}
	res := f.m.SyncPodWithOptions(t.Context(), pod, f.status(t, pod), SyncPodOptions{
		CgroupParent: "/kubepods/podvol",
		Mounts: func(_ *v1.Pod, c *v1.Container, _ map[string]string) ([]Mount, error) {
			if c.Name != "a" {
				return nil, fmt.Errorf("mounts asked for container %q", c.Name)
			}
			return []Mount{
				{ContainerPath: "/data", HostPath: "/var/lib/data"},
				{ContainerPath: "/etc/app", HostPath: "/var/lib/conf/app", ReadOnly: true, Propagation: v1.MountPropagationHostToContainer},
			}, nil
		},
	})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	type mount struct {
		Container, Host string
		RO              bool
		Propagation     runtimeapi.MountPropagation
	}
	var got []mount
	for _, m := range f.rec.lastContainerConfig("a").Mounts {
		got = append(got, mount{m.ContainerPath, m.HostPath, m.Readonly, m.Propagation})
	}
	want := []mount{
		{"/data", "/var/lib/data", false, runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{"/etc/app", "/var/lib/conf/app", true, runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if got := f.rec.sandboxConfigs[0].GetLinux().GetCgroupParent(); got != "/kubepods/podvol" {
		t.Errorf("cgroup parent = %q", got)
	}
}

func TestSyncPodRecreatesDeadSandbox(t *testing.T) {
	f := newFakes(t, Options{})
	pod := withInit(testPod("dead", "a"), "i1")
	f.sync(t, pod)
	f.exit(pod, "i1", 0)
	f.sync(t, pod)
	// The sandbox dies with its containers.
	f.rs.Lock()
	var oldSandbox string
	for id, s := range f.rs.Sandboxes {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		oldSandbox = id
	}
	f.rs.Unlock()
	f.exit(pod, "a", 137)
	f.calls()

	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	// Init containers are purged and the new sandbox starts with the first.
	want := []string{"RemoveContainer", "RunPodSandbox", "CreateContainer", "StartContainer"}
	if diff := cmp.Diff(want, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := startedNames(res); !cmp.Equal(got, []string{"i1"}) {
		t.Errorf("started %v, want [i1]", got)
	}
	if got := f.rec.sandboxConfigs[len(f.rec.sandboxConfigs)-1].Metadata.Attempt; got != 1 {
		t.Errorf("new sandbox attempt = %d, want 1", got)
	}
	st := f.status(t, pod)
	if st.SandboxStatuses[0].Id == oldSandbox {
		t.Errorf("newest sandbox is the old one")
	}
}

func TestSyncPodPrunesOldInstances(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("prune", "a", "b")
	f.sync(t, pod)
	running := f.container(pod, "a")
	// Three older exited instances of a, one of b.
	f.rs.Lock()
	add := func(name string, restart int, created int64) string {
		id := fmt.Sprintf("%s-old-%d", name, restart)
		f.rs.Containers[id] = &critest.FakeContainer{
			SandboxID: running.SandboxID,
			ContainerStatus: runtimeapi.ContainerStatus{
				Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: uint32(restart)},
				State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: created, FinishedAt: created + 1,
				Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}, Labels: running.Labels,
				Annotations: map[string]string{runtime.AnnotationRestartCount: strconv.Itoa(restart)},
			},
		}
		return id
	}
	a1, a2, a3 := add("a", 1, 100), add("a", 2, 200), add("a", 3, 300)
	f.rs.Unlock()
	_ = a3
	f.calls()
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"RemoveContainer", "RemoveContainer"}, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	f.rs.Lock()
	_, has1 := f.rs.Containers[a1]
	_, has2 := f.rs.Containers[a2]
	f.rs.Unlock()
	if has1 || has2 {
		t.Errorf("old instances kept: %s %v, %s %v", a1, has1, a2, has2)
	}
	if n := f.countContainers(pod, "a"); n != 2 {
		t.Errorf("instances of a = %d, want 2 (running + previous)", n)
	}
	// The previous instance, shown as lastState, is the newest exited one.
	var ids []string
	for _, c := range f.status(t, pod).ContainerStatuses {
		if c.Name == "a" {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) != 2 || ids[1] != "a-old-3" {
		t.Errorf("instances of a, newest first = %v, want the newest exited instance a-old-3 second", ids)
	}
}

// TestSyncPodNeverStartedContainer: an agent stopped between CreateContainer
// and StartContainer leaves a container that never ran. The next agent
// replaces it: it removes it and starts a new instance that takes its
// restart count, attempt and log file, so that the container, which never
// ran, shows no restart. An app container and an init container alike.
func TestSyncPodNeverStartedContainer(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  func() *v1.Pod
	}{
		{"app container", func() *v1.Pod { return testPod("never", "a") }},
		{"init container", func() *v1.Pod {
			pod := testPod("never-init", "a")
			pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "init:v1"}}
			return pod
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t, Options{})
			pod := tc.pod()
			name := "a"
			if len(pod.Spec.InitContainers) > 0 {
				name = "init"
			}
			// The start never happens: the agent stopped.
			f.rs.InjectError("StartContainer", context.Canceled)
			f.sync(t, pod)
			created := f.container(pod, name)
			if created == nil || created.State != runtimeapi.ContainerState_CONTAINER_CREATED {
				t.Fatalf("container after the interrupted start: %+v, want one created", created)
			}
			f.calls()

			// The agent starts again: a new manager.
			m2, err := New(f.rec, f.is, Options{PodLogsDir: f.dir})
			if err != nil {
				t.Fatal(err)
			}
			st, err := m2.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			res := m2.SyncPod(t.Context(), pod, st)
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"RemoveContainer", "CreateContainer", "StartContainer"}, f.calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if n := f.countContainers(pod, name); n != 1 {
				t.Errorf("%d instances of %s, want 1 (the never-started one removed)", n, name)
			}
			c := f.container(pod, name)
			if c == created || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Errorf("instance %s in state %s, want a new one running", c.Id, c.State)
			}
			if got := c.Annotations[runtime.AnnotationRestartCount]; got != "0" {
				t.Errorf("restart count %s, want 0: the first instance never ran", got)
			}
			if got := f.rec.lastContainerConfig(name); got.Metadata.Attempt != 0 || got.LogPath != name+"/0.log" {
				t.Errorf("attempt %d, log path %s; want 0 and %s/0.log", got.Metadata.Attempt, got.LogPath, name)
			}
			st, err = m2.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if cs := st.FindContainerStatusByName(name); cs == nil || cs.RestartCount != 0 || cs.State != runtime.ContainerStateRunning {
				t.Errorf("status of %s: %+v, want running with no restart", name, cs)
			}
		})
	}
}
