package volume_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
)

func ptr[T any](v T) *T { return &v }

func TestContainerMounts(t *testing.T) {
	e := newEnv(t, func(o *volume.Options) { o.NoSubPathBind = true })
	data := filepath.Join(e.host, "data")
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := map[string]volume.Mount{
		"data": {Name: "data", HostPath: data},
		"ro":   {Name: "ro", HostPath: data, ReadOnly: true},
	}
	vols := []v1.Volume{hostVol("data", data, ""), hostVol("ro", data, ""), emptyVol("unset", "")}
	for _, tc := range []struct {
		name       string
		vm         v1.VolumeMount
		privileged bool
		env        map[string]string
		want       volume.ContainerMount // Name, ContainerPath default from vm
		wantErr    string
		wantClass  error
	}{
		{name: "plain", vm: v1.VolumeMount{Name: "data", MountPath: "/d"}, want: volume.ContainerMount{HostPath: data}},
		{name: "readOnly mount", vm: v1.VolumeMount{Name: "data", MountPath: "/d", ReadOnly: true}, want: volume.ContainerMount{HostPath: data, ReadOnly: true}},
		{name: "read-only volume", vm: v1.VolumeMount{Name: "ro", MountPath: "/d"}, want: volume.ContainerMount{HostPath: data, ReadOnly: true}},
		{name: "propagation None", vm: v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: ptr(v1.MountPropagationNone)}, want: volume.ContainerMount{HostPath: data}},
		{name: "propagation HostToContainer", vm: v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: ptr(v1.MountPropagationHostToContainer)}, want: volume.ContainerMount{HostPath: data, Propagation: v1.MountPropagationHostToContainer}},
		{name: "propagation Bidirectional, privileged", privileged: true, vm: v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: ptr(v1.MountPropagationBidirectional)}, want: volume.ContainerMount{HostPath: data, Propagation: v1.MountPropagationBidirectional}},
		{name: "propagation Bidirectional, unprivileged", vm: v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: ptr(v1.MountPropagationBidirectional)}, wantErr: "Bidirectional mount propagation is available only to privileged containers", wantClass: volume.ErrInvalid},
		{name: "unknown propagation", vm: v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: ptr(v1.MountPropagationMode("Sideways"))}, wantErr: `invalid mount propagation "Sideways"`, wantClass: volume.ErrInvalid},
		{name: "volume not in the spec", vm: v1.VolumeMount{Name: "nope", MountPath: "/d"}, wantErr: "no volume nope in the pod spec", wantClass: volume.ErrInvalid},
		{name: "volume not set up", vm: v1.VolumeMount{Name: "unset", MountPath: "/d"}, wantErr: "volume mount unset: volume is not set up"},
		{name: "empty mountPath", vm: v1.VolumeMount{Name: "data"}, wantErr: "mountPath is empty", wantClass: volume.ErrInvalid},
		{name: "subPath", vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "sub"}, want: volume.ContainerMount{HostPath: filepath.Join(data, "sub")}},
		{name: "subPath unclean", vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "./sub//"}, want: volume.ContainerMount{HostPath: filepath.Join(data, "sub")}},
		{name: "subPath absolute", vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "/etc"}, wantErr: `subPath "/etc" must be a relative path`, wantClass: volume.ErrInvalid},
		{name: "subPath with dot-dot", vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "sub/../../etc"}, wantErr: `subPath "sub/../../etc" must not contain '..'`, wantClass: volume.ErrInvalid},
		{name: "subPathExpr", env: map[string]string{"POD": "web"}, vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: "logs/$(POD)"}, want: volume.ContainerMount{HostPath: filepath.Join(data, "logs/web")}},
		{name: "subPathExpr with dot-dot", env: map[string]string{"UP": ".."}, vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: "$(UP)/x"}, wantErr: "must not contain '..'", wantClass: volume.ErrInvalid},
		{name: "subPathExpr bomb", env: map[string]string{"K": strings.Repeat("k", 1024)}, vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: strings.Repeat("$(K)", 1<<14)}, wantErr: "subPathExpr: too long: more than 4096 bytes after $(VAR) expansion", wantClass: volume.ErrInvalid},
		{name: "subPath and subPathExpr", vm: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "a", SubPathExpr: "b"}, wantErr: "mutually exclusive", wantClass: volume.ErrInvalid},
		{name: "subPath missing in a read-only volume", vm: v1.VolumeMount{Name: "ro", MountPath: "/d", SubPath: "new"}, wantErr: "does not exist and the volume is read-only", wantClass: volume.ErrNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("uid-web", vols...)
			c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{tc.vm}}
			if tc.privileged {
				c.SecurityContext = &v1.SecurityContext{Privileged: ptr(true)}
			}
			got, err := e.m.ContainerMounts(pod, c, mounts, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "volume: container app: volume mount "+tc.vm.Name+": ") {
					t.Errorf("error %q does not name the container and the mount", err)
				}
				if tc.wantClass != nil && !errors.Is(err, tc.wantClass) {
					t.Errorf("err %v is not %v", err, tc.wantClass)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Name, want.ContainerPath = tc.vm.Name, tc.vm.MountPath
			if want.Propagation == "" {
				want.Propagation = v1.MountPropagationNone
			}
			if diff := cmp.Diff([]volume.ContainerMount{want}, got); diff != "" {
				t.Errorf("ContainerMounts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubPathConfinement(t *testing.T) {
	// Without bind mounts, so that it runs unprivileged too.
	e := newEnv(t, func(o *volume.Options) { o.NoSubPathBind = true })
	vol := filepath.Join(e.host, "vol")
	outside := filepath.Join(e.host, "outside")
	for _, d := range []string{vol + "/a", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(vol, 0o771); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"vol/in":      filepath.Join(vol, "a"),
		"vol/out":     outside,
		"vol/a/up":    "../../outside",
		"vol/dangle":  filepath.Join(outside, "new"),
		"vol/a/local": ".",
	} {
		if err := os.Symlink(target, filepath.Join(e.host, name)); err != nil {
			t.Fatal(err)
		}
	}
	mounts := map[string]volume.Mount{"v": {Name: "v", HostPath: vol}}
	pod := newPod("uid-web", hostVol("v", vol, ""))
	for _, tc := range []struct {
		name, subPath string
		want          string // relative to the volume
		wantErr       string
		notMade       string // relative to the host directory
	}{
		{name: "existing", subPath: "a", want: "a"},
		{name: "missing is created", subPath: "new/deep", want: "new/deep"},
		{name: "symlink inside", subPath: "in", want: "a"},
		{name: "symlink to the same directory", subPath: "a/local", want: "a"},
		{name: "symlink outside", subPath: "out", wantErr: "resolves to " + outside + ", outside the volume"},
		{name: "relative symlink outside", subPath: "a/up", wantErr: "resolves to " + outside},
		{name: "through a symlink outside", subPath: "out/x", wantErr: "outside the volume", notMade: "outside/x"},
		{name: "dangling symlink outside", subPath: "dangle", wantErr: "outside the volume", notMade: "outside/new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/m", SubPath: tc.subPath}}}
			got, err := e.m.ContainerMounts(pod, c, mounts, nil)
			if tc.notMade != "" && exists(filepath.Join(e.host, tc.notMade)) {
				t.Errorf("%s was created", tc.notMade)
			}
			if tc.wantErr != "" {
				if !errors.Is(err, volume.ErrNotAllowed) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want ErrNotAllowed containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(vol, tc.want); got[0].HostPath != want {
				t.Errorf("HostPath %s, want %s", got[0].HostPath, want)
			}
		})
	}
	fi, err := os.Stat(filepath.Join(vol, "new/deep"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o771 {
		t.Errorf("created subPath has mode %v, want the volume's 0771", fi.Mode().Perm())
	}
}

// TestSubPathModeOfVolumeRoot: a missing subPath is created with the mode
// of the volume's root, setgid and sticky bits included, as the kubelet
// creates it: an emptyDir with an FSGroup (dgtrwxrwxrwx) gives its
// subPaths the same mode.
func TestSubPathModeOfVolumeRoot(t *testing.T) {
	e := newEnv(t, func(o *volume.Options) { o.NoSubPathBind = true })
	vol := filepath.Join(e.host, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	want := fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o777
	if err := os.Chmod(vol, want); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(vol); err != nil || fi.Mode() != want {
		t.Skipf("this file system does not keep the mode %v on a directory: %v, %v", want, fi.Mode(), err)
	}
	mounts := map[string]volume.Mount{"v": {Name: "v", HostPath: vol}}
	pod := newPod("uid-web", hostVol("v", vol, ""))
	c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/m", SubPath: "new/deep"}}}
	if _, err := e.m.ContainerMounts(pod, c, mounts, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"new", "new/deep"} {
		fi, err := os.Stat(filepath.Join(vol, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("created subPath directory %s has mode %v, want the volume's %v", d, fi.Mode(), want)
		}
	}
}

// TestSubPathOfMemoryEmptyDirWithFSGroup is the node's side of the e2e
// spec "EmptyDir volumes when FSGroup is specified ... nonexistent volume
// subPath should have the correct mode and owner using FSGroup": a Memory
// emptyDir of a pod with fsGroup 123, mounted by a missing subPath, gives
// the container a directory owned by root, group 123, mode dgtrwxrwxrwx
// (the tmpfs root's 1777 with setgid, as the kubelet's).
func TestSubPathOfMemoryEmptyDirWithFSGroup(t *testing.T) {
	requireRoot(t)
	e := newEnv(t, func(o *volume.Options) { o.NoSubPathBind = true })
	pod := newPod("uid-web", emptyVol("test-volume", v1.StorageMediumMemory))
	gid := int64(123)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts[0].SubPath = "test-sub"
	mounts, err := e.m.WaitForPodVolumes(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	cms, err := e.m.ContainerMounts(pod, c, mounts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cms) != 1 {
		t.Fatalf("container mounts %+v, want one", cms)
	}
	fi, err := os.Stat(cms[0].HostPath)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	want := fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o777
	if fi.Mode() != want || st.Uid != 0 || int64(st.Gid) != gid {
		t.Errorf("subPath %s: mode %v uid %d gid %d, want mode %v (dgtrwxrwxrwx) uid 0 gid %d", cms[0].HostPath, fi.Mode(), st.Uid, st.Gid, want, gid)
	}
}

func TestSubPathBindMount(t *testing.T) {
	requireRoot(t)
	e := newEnv(t, nil)
	pod := newPod("uid-web", emptyVol("shared", ""))
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "shared", MountPath: "/whole"},
		{Name: "shared", MountPath: "/conf", SubPath: "conf"},
		{Name: "shared", MountPath: "/file", SubPath: "conf/app.ini", ReadOnly: true},
	}
	mounts, err := e.m.WaitForPodVolumes(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	volDir := mounts["shared"].HostPath
	c := &pod.Spec.Containers[0]
	// The directory subPath does not exist yet: it is created, then bound.
	if err := os.MkdirAll(filepath.Join(volDir, "conf"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volDir, "conf/app.ini"), []byte("safe"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.ContainerMounts(pod, c, mounts, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []volume.ContainerMount{
		{Name: "shared", ContainerPath: "/whole", HostPath: volDir, Propagation: v1.MountPropagationNone},
		{Name: "shared", ContainerPath: "/conf", HostPath: e.dirs.SubPath("uid-web", "shared", "app", 1), Propagation: v1.MountPropagationNone},
		{Name: "shared", ContainerPath: "/file", HostPath: e.dirs.SubPath("uid-web", "shared", "app", 2), ReadOnly: true, Propagation: v1.MountPropagationNone},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ContainerMounts (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(got[2].HostPath); err != nil || string(b) != "safe" {
		t.Errorf("file subPath bind shows %q, %v", b, err)
	}

	// A container swaps the directory for a symlink to the host's /etc:
	// the binds still show what was checked.
	if err := os.Rename(filepath.Join(volDir, "conf"), filepath.Join(volDir, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(volDir, "conf")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(got[1].HostPath, "app.ini")); err != nil || string(b) != "safe" {
		t.Errorf("after the swap the bind shows %q, %v", b, err)
	}
	if exists(filepath.Join(got[1].HostPath, "passwd")) {
		t.Error("the bind shows the host's /etc")
	}
	// Starting the container again now fails: the subPath leaves the
	// volume.
	if _, err := e.m.ContainerMounts(pod, c, mounts, nil); !errors.Is(err, volume.ErrNotAllowed) {
		t.Errorf("ContainerMounts after the swap: err %v, want ErrNotAllowed", err)
	}
	// Once repaired, the existing binds are reused, not stacked.
	if err := os.Remove(filepath.Join(volDir, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(volDir, "old"), filepath.Join(volDir, "conf")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ContainerMounts(pod, c, mounts, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range got[1:] {
		if n, _ := mountCount(t, m.HostPath); n != 1 {
			t.Errorf("%s mounted %d times, want once", m.HostPath, n)
		}
	}

	if err := e.m.ReleasePod(t.Context(), "uid-web"); err != nil {
		t.Fatal(err)
	}
	for _, m := range got[1:] {
		if n, _ := mountCount(t, m.HostPath); n != 0 {
			t.Errorf("%s still mounted after ReleasePod", m.HostPath)
		}
	}
	if exists(e.dirs.Pod("uid-web")) {
		t.Error("pod directory still there")
	}
}

func TestSubPathBindNeedsPrivileges(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs only unprivileged")
	}
	e := newEnv(t, nil)
	vol := filepath.Join(e.host, "vol")
	if err := os.MkdirAll(filepath.Join(vol, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/m", SubPath: "a"}}}
	_, err := e.m.ContainerMounts(newPod("uid-web", hostVol("v", vol, "")), c, map[string]volume.Mount{"v": {Name: "v", HostPath: vol}}, nil)
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("err %v, want EPERM", err)
	}
}
