package podruntime

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Any client-go recorder is an EventRecorder.
var _ runtime.EventRecorder = record.EventRecorder(nil)

// drain returns the events recorded so far ("Type Reason Message").
func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

const (
	pulledA  = `Normal Pulled Container image "busybox:1.36" already present on machine and can be accessed by the pod`
	createdA = "Normal Created Created container: a"
	startedA = "Normal Started Started container a"
)

func TestSyncPodEvents(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the pod and the fakes before the first sync.
		setup func(f *fakes, pod *v1.Pod)
		// then runs after the first sync, before the second (nil: no
		// second sync).
		then func(t *testing.T, f *fakes, pod *v1.Pod)
		// unhealthy is the probe result of every running container.
		unhealthy string
		want      [][]string // events of each sync
	}{{
		name: "normal start",
		want: [][]string{{pulledA, createdA, startedA}},
	}, {
		name: "image pulled",
		setup: func(f *fakes, pod *v1.Pod) {
			pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		},
		want: [][]string{{
			`Normal Pulling Pulling image "busybox:1.36"`,
			`Normal Pulled Successfully pulled image "busybox:1.36" in 0s`,
			createdA, startedA,
		}},
	}, {
		name: "image pull failure and back-off",
		setup: func(f *fakes, pod *v1.Pod) {
			pod.Spec.Containers[0].Image = "missing:1"
			f.is.InjectError("PullImage", errors.New("registry down"))
		},
		then: func(*testing.T, *fakes, *v1.Pod) {},
		want: [][]string{{
			`Normal Pulling Pulling image "missing:1"`,
			`Warning Failed Failed to pull image "missing:1": registry down`,
			"Warning Failed Error: ErrImagePull",
		}, {
			`Normal BackOff Back-off pulling image "missing:1"`,
			"Warning Failed Error: ImagePullBackOff",
		}},
	}, {
		name: "image never pulled",
		setup: func(f *fakes, pod *v1.Pod) {
			pod.Spec.Containers[0].Image = "missing:1"
			pod.Spec.Containers[0].ImagePullPolicy = v1.PullNever
		},
		want: [][]string{{
			`Warning ErrImageNeverPull Container image "missing:1" is not present with pull policy of Never`,
			"Warning Failed Error: ErrImageNeverPull",
		}},
	}, {
		name: "image inspection failure",
		setup: func(f *fakes, pod *v1.Pod) {
			f.is.InjectError("ImageStatus", errors.New("disk gone"))
		},
		want: [][]string{{
			`Warning InspectFailed Failed to inspect image "busybox:1.36": disk gone`,
			"Warning Failed Error: ImageInspectError",
		}},
	}, {
		name: "container config failure",
		setup: func(f *fakes, pod *v1.Pod) {
			pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}}}
		},
		want: [][]string{{pulledA, "Warning Failed Error: couldn't get secret default/: no ConfigMap and Secret getter configured"}},
	}, {
		name: "create failure",
		setup: func(f *fakes, pod *v1.Pod) {
			f.rs.InjectError("CreateContainer", errors.New("no space left"))
		},
		want: [][]string{{pulledA, "Warning Failed Error: no space left"}},
	}, {
		name: "start failure",
		setup: func(f *fakes, pod *v1.Pod) {
			f.rs.InjectError("StartContainer", errors.New("exec format error"))
		},
		want: [][]string{{pulledA, createdA, "Warning Failed Error: exec format error"}},
	}, {
		name: "crash loop",
		then: func(t *testing.T, f *fakes, pod *v1.Pod) {
			// The first exit restarts at once, the second backs off.
			time.Sleep(time.Second)
			f.exit(pod, "a", 1)
			f.sync(t, pod)
			time.Sleep(time.Second)
			f.exit(pod, "a", 1)
		},
		want: [][]string{
			{pulledA, createdA, startedA, pulledA, createdA, startedA},
			{"Warning BackOff Back-off restarting failed container a in pod ev_default(ev-uid)"},
		},
	}, {
		name:      "liveness failure",
		then:      func(*testing.T, *fakes, *v1.Pod) {},
		unhealthy: "liveness",
		want: [][]string{
			{pulledA, createdA, startedA},
			{"Normal Killing Container a failed liveness probe, will be restarted", pulledA, createdA, startedA},
		},
	}, {
		name: "startup failure under restartPolicy Never",
		setup: func(f *fakes, pod *v1.Pod) {
			pod.Spec.RestartPolicy = v1.RestartPolicyNever
		},
		then:      func(*testing.T, *fakes, *v1.Pod) {},
		unhealthy: "startup",
		want: [][]string{
			{pulledA, createdA, startedA},
			// Nothing is left to run: the whole pod is killed, and the
			// kubelet says so.
			{"Normal Killing Stopping container a"},
		},
	}, {
		name: "spec change",
		then: func(t *testing.T, f *fakes, pod *v1.Pod) {
			pod.Spec.Containers[0].Args = []string{"v2"}
		},
		want: [][]string{
			{pulledA, createdA, startedA},
			{"Normal Killing Container a definition changed, will be restarted", pulledA, createdA, startedA},
		},
	}, {
		name: "sandbox changed",
		then: func(t *testing.T, f *fakes, pod *v1.Pod) {
			f.rs.Lock()
			for _, s := range f.rs.Sandboxes {
				s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			}
			f.rs.Unlock()
		},
		want: [][]string{
			{pulledA, createdA, startedA},
			{
				"Normal SandboxChanged Pod sandbox changed, it will be killed and re-created.",
				"Normal Killing Stopping container a",
				pulledA, createdA, startedA,
			},
		},
	}, {
		name: "sandbox failure",
		setup: func(f *fakes, pod *v1.Pod) {
			f.rs.InjectError("RunPodSandbox", errors.New("cni failed"))
		},
		want: [][]string{{"Warning FailedCreatePodSandBox Failed to create pod sandbox: cni failed"}},
	}, {
		name: "sandbox failure of a pod being deleted",
		setup: func(f *fakes, pod *v1.Pod) {
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			f.rs.InjectError("RunPodSandbox", errors.New("cni failed"))
		},
		want: [][]string{nil},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := record.NewFakeRecorder(100)
				var unhealthy UnhealthyFunc
				if tt.unhealthy != "" {
					unhealthy = func(string) string { return tt.unhealthy }
				}
				f := newFakes(t, Options{Recorder: rec})
				f.unhealthy = unhealthy
				pod := testPod("ev", "a")
				if tt.setup != nil {
					tt.setup(f, pod)
				}
				var got [][]string
				f.sync(t, pod)
				if tt.then != nil {
					// Events of what then does count with the first sync.
					tt.then(t, f, pod)
					got = append(got, drain(rec))
					f.sync(t, pod)
				}
				got = append(got, drain(rec))
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("events of each sync (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestKillPodEvents(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	f := newFakes(t, Options{Recorder: rec})
	pod := testPod("kill", "a")
	f.sync(t, pod)
	drain(rec)
	if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Normal Killing Stopping container a"}, drain(rec)); diff != "" {
		t.Errorf("events of KillPod (-want +got):\n%s", diff)
	}

	// An orphan (no pod) is stopped without events, as the kubelet does.
	f.sync(t, pod)
	drain(rec)
	st := f.status(t, pod)
	if err := f.m.KillPod(t.Context(), nil, runtime.RunningPod(st), nil); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec); len(got) != 0 {
		t.Errorf("events of KillPod of an orphan = %q, want none", got)
	}
}

// objects records the objects events are recorded on.
type objects struct {
	mu   sync.Mutex
	refs []v1.ObjectReference
	msgs []string
}

func (o *objects) Event(obj apiruntime.Object, _, reason, message string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refs = append(o.refs, *obj.(*v1.ObjectReference))
	o.msgs = append(o.msgs, reason+" "+message)
}

func TestEventObjects(t *testing.T) {
	o := &objects{}
	f := newFakes(t, Options{Recorder: o})
	pod := withInit(testPod("refs", "a"), "i1")
	pod.ResourceVersion = "42"
	f.rs.InjectError("RunPodSandbox", errors.New("cni failed"))
	f.sync(t, pod)
	f.sync(t, pod)
	ref := func(path string) v1.ObjectReference {
		return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "refs", UID: "refs-uid", ResourceVersion: "42", FieldPath: path}
	}
	want := []v1.ObjectReference{ref(""), ref("spec.initContainers{i1}"), ref("spec.initContainers{i1}"), ref("spec.initContainers{i1}")}
	if diff := cmp.Diff(want, o.refs); diff != "" {
		t.Errorf("objects of the events %q (-want +got):\n%s", o.msgs, diff)
	}
	f.exit(pod, "i1", 0)
	o.refs = nil
	f.sync(t, pod)
	want = []v1.ObjectReference{ref("spec.containers{a}"), ref("spec.containers{a}"), ref("spec.containers{a}")}
	if diff := cmp.Diff(want, o.refs); diff != "" {
		t.Errorf("objects of the events of an app container (-want +got):\n%s", diff)
	}
}

func TestEventsNameContainersNotIDs(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	e := events{rec: rec}
	pod := testPod("ids", "a")
	e.container(pod, &pod.Spec.Containers[0], "0123abcd", v1.EventTypeWarning, EventFailed, "Error: container 0123abcd: exec failed")
	e.container(pod, &v1.Container{Name: "gone"}, "", v1.EventTypeNormal, EventKilling, "Stopping container gone")
	want := []string{"Warning Failed Error: container a: exec failed"}
	if diff := cmp.Diff(want, drain(rec)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// A nil recorder records nothing and does not panic.
	events{}.pod(pod, v1.EventTypeNormal, EventSandboxChanged, "x")
	events{}.container(pod, &pod.Spec.Containers[0], "", v1.EventTypeNormal, EventStarted, "x")
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("plain"), "plain"},
		{status.Error(codes.NotFound, "not found"), "not found"},
	}
	for _, tt := range tests {
		if got := errorMessage(tt.err); got != tt.want {
			t.Errorf("errorMessage(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
