package podruntime

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestVerifyRunAsNonRoot(t *testing.T) {
	const desc = `(pod: "nr_default(uid-nr)", container: app)`
	uid := func(v int64) *int64 { return &v }
	tests := []struct {
		name     string
		pod, ctr *v1.SecurityContext // RunAsNonRoot and RunAsUser of the pod and the container
		uid      *int64
		username string
		want     string
	}{
		{name: "not asked", uid: uid(0)},
		{name: "root image", ctr: &v1.SecurityContext{RunAsNonRoot: ptr(true)}, uid: uid(0),
			want: "container has runAsNonRoot and image will run as root " + desc},
		{name: "asked at pod level", pod: &v1.SecurityContext{RunAsNonRoot: ptr(true)}, uid: uid(0),
			want: "container has runAsNonRoot and image will run as root " + desc},
		{name: "container turns it off", pod: &v1.SecurityContext{RunAsNonRoot: ptr(true)}, ctr: &v1.SecurityContext{RunAsNonRoot: ptr(false)}, uid: uid(0)},
		{name: "numeric non-root image", ctr: &v1.SecurityContext{RunAsNonRoot: ptr(true)}, uid: uid(1000)},
		{name: "non-numeric user", ctr: &v1.SecurityContext{RunAsNonRoot: ptr(true)}, username: "nginx",
			want: "container has runAsNonRoot and image has non-numeric user (nginx), cannot verify user is non-root " + desc},
		{name: "runAsUser 0", ctr: &v1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(0))}, uid: uid(1000),
			want: "container's runAsUser breaks non-root policy " + desc},
		{name: "pod runAsUser 0", pod: &v1.SecurityContext{RunAsUser: ptr(int64(0))}, ctr: &v1.SecurityContext{RunAsNonRoot: ptr(true)},
			want: "container's runAsUser breaks non-root policy " + desc},
		{name: "runAsUser overrides a root image", ctr: &v1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))}, uid: uid(0)},
		{name: "container runAsUser overrides the pod's 0", pod: &v1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(0))},
			ctr: &v1.SecurityContext{RunAsUser: ptr(int64(1))}, uid: uid(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod("nr", "app")
			pod.UID = "uid-nr"
			if tt.pod != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: tt.pod.RunAsNonRoot, RunAsUser: tt.pod.RunAsUser}
			}
			pod.Spec.Containers[0].SecurityContext = tt.ctr
			err := verifyRunAsNonRoot(pod, &pod.Spec.Containers[0], tt.uid, tt.username)
			if got := errString(err); got != tt.want {
				t.Errorf("verifyRunAsNonRoot = %q\nwant                 %q", got, tt.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestImageUser(t *testing.T) {
	for _, tt := range []struct {
		img      *runtimeapi.Image
		uid      int64 // -1: nil
		username string
	}{
		{img: nil, uid: 0},
		{img: &runtimeapi.Image{}, uid: 0},
		{img: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 65534}}, uid: 65534},
		{img: &runtimeapi.Image{Username: "nobody"}, uid: -1, username: "nobody"},
	} {
		uid, name := imageUser(tt.img)
		got := int64(-1)
		if uid != nil {
			got = *uid
		}
		if got != tt.uid || name != tt.username {
			t.Errorf("imageUser(%v) = %d %q, want %d %q", tt.img, got, name, tt.uid, tt.username)
		}
	}
}

// TestSyncPodRunAsNonRoot: a runAsNonRoot container of an image that runs
// as root is never created and waits with CreateContainerConfigError and
// the kubelet's message; one of a non-root image starts.
func TestSyncPodRunAsNonRoot(t *testing.T) {
	f := newFakes(t, Options{})
	f.is.Images["app:v2"].Uid = &runtimeapi.Int64Value{Value: 1000}
	pod := testPod("nr", "a", "b")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr(true)}
	pod.Spec.Containers[1].Image = "app:v2"
	res := f.sync(t, pod)
	if !errors.Is(res.Err(), ErrCreateContainerConfig) {
		t.Fatalf("err = %v, want ErrCreateContainerConfig", res.Err())
	}
	want := `container has runAsNonRoot and image will run as root (pod: "nr_default(` + string(pod.UID) + `)", container: a)`
	if r, msg, ok := f.m.WaitingReason(pod.UID, "a"); !ok || r != "CreateContainerConfigError" || msg != want {
		t.Errorf("waiting = %q %q %v, want CreateContainerConfigError %q", r, msg, ok, want)
	}
	if n := f.countContainers(pod, "a"); n != 0 {
		t.Errorf("%d containers a created, want none", n)
	}
	if n := f.countContainers(pod, "b"); n != 1 {
		t.Errorf("%d containers b created, want 1 (its image runs as uid 1000)", n)
	}
}
