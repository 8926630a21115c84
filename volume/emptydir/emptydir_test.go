package emptydir_test

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs or change a group (CI runs as root)")
	}
}

func emptyDirVolume(name string, medium v1.StorageMedium, limit string) *v1.Volume {
	v := &v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: medium}}}
	if limit != "" {
		q := resource.MustParse(limit)
		v.EmptyDir.SizeLimit = &q
	}
	return v
}

// request lays out a volume directory as the manager does.
func request(t *testing.T, pod *v1.Pod, vol *v1.Volume) volume.SetUpRequest {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dirs := volume.PodDirs{Root: root}
	if pod == nil {
		pod = &v1.Pod{}
		pod.UID = "uid-1"
	}
	dir := dirs.Volume(pod.UID, emptydir.PluginName, vol.Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	return volume.SetUpRequest{Pod: pod, Volume: vol, Dir: dir}
}

func tearDown(t *testing.T, p *emptydir.Plugin, req volume.SetUpRequest) error {
	return p.TearDown(t.Context(), volume.TearDownRequest{PodUID: req.Pod.UID, Name: req.Volume.Name, Dir: req.Dir})
}

// mountsAt counts the mounts on path in the mount table.
func mountsAt(t *testing.T, path string) (n int, fsType string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == path {
			n++
			for i, f := range fields {
				if f == "-" && i+1 < len(fields) {
					fsType = fields[i+1]
				}
			}
		}
	}
	return n, fsType
}

func TestOnDisk(t *testing.T) {
	p := emptydir.New(emptydir.Options{})
	req := request(t, nil, emptyDirVolume("scratch", v1.StorageMediumDefault, ""))
	m, err := p.SetUp(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if m != (volume.Mount{Name: "scratch", HostPath: req.Dir}) {
		t.Errorf("Mount = %+v, want the volume's directory, writable", m)
	}
	fi, err := os.Stat(req.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("directory mode %v, want 0777 whatever the umask", fi.Mode())
	}
	if err := os.WriteFile(filepath.Join(req.Dir, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second SetUp (the agent restarted) keeps the content.
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(req.Dir, "data")); err != nil || string(b) != "kept" {
		t.Errorf("content after a second SetUp: %q, %v", b, err)
	}
	if err := tearDown(t, p, req); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(req.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory still there after TearDown: %v", err)
	}
}

func TestFSGroup(t *testing.T) {
	requireRoot(t)
	gid := int64(4242)
	pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{FSGroup: &gid}}}
	pod.UID = "uid-fsgroup"
	p := emptydir.New(emptydir.Options{})
	req := request(t, pod, emptyDirVolume("shared", v1.StorageMediumDefault, ""))
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tearDown(t, p, req) })
	fi, err := os.Stat(req.Dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if want := fs.ModeDir | fs.ModeSetgid | 0o777; int64(st.Gid) != gid || fi.Mode() != want {
		t.Errorf("directory gid %d mode %v, want gid %d, mode %v", st.Gid, fi.Mode(), gid, want)
	}
}

// TestMemoryFSGroup: a Memory emptyDir of a pod with an fsGroup has the
// mode the kubelet gives it, dgtrwxrwxrwx: the tmpfs root's 1777 with
// setgid added, which the e2e spec "nonexistent volume subPath should have
// the correct mode and owner using FSGroup" reads on a subPath created
// from it. A second SetUp (the agent restarted) keeps it.
func TestMemoryFSGroup(t *testing.T) {
	requireRoot(t)
	gid := int64(123)
	pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{FSGroup: &gid}}}
	pod.UID = "uid-memory-fsgroup"
	p := emptydir.New(emptydir.Options{})
	req := request(t, pod, emptyDirVolume("shared", v1.StorageMediumMemory, "1Mi"))
	want := fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o777
	for i := range 2 {
		if _, err := p.SetUp(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			t.Cleanup(func() { _ = tearDown(t, p, req) })
		}
		fi, err := os.Stat(req.Dir)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int64(st.Gid) != gid || fi.Mode() != want {
			t.Errorf("SetUp %d: tmpfs root gid %d mode %v, want gid %d, mode %v (dgtrwxrwxrwx)", i+1, st.Gid, fi.Mode(), gid, want)
		}
	}
}

func TestMemory(t *testing.T) {
	requireRoot(t)
	p := emptydir.New(emptydir.Options{})
	req := request(t, nil, emptyDirVolume("cache", v1.StorageMediumMemory, "1Mi"))
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tearDown(t, p, req) })
	if n, typ := mountsAt(t, req.Dir); n != 1 || typ != "tmpfs" {
		t.Fatalf("%d mounts of type %q on the volume, want one tmpfs", n, typ)
	}
	fi, err := os.Stat(req.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := fs.ModeDir | fs.ModeSticky | 0o777; fi.Mode() != want {
		t.Errorf("tmpfs root mode %v, want %v (tmpfs's 1777, as the kubelet's)", fi.Mode(), want)
	}

	// Writing beyond the size limit fails with ENOSPC.
	f, err := os.Create(filepath.Join(req.Dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	var written int
	for written = 0; written < 4<<20; written += len(chunk) {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing %d bytes into a 1Mi tmpfs: err %v, want ENOSPC", written, err)
	}
	if written > 1<<20 {
		t.Errorf("wrote %d bytes into a 1Mi tmpfs", written)
	}

	// SetUp again (the agent restarted): the tmpfs is reused, not stacked.
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n, _ := mountsAt(t, req.Dir); n != 1 {
		t.Errorf("%d mounts on the volume after a second SetUp, want 1", n)
	}

	if err := tearDown(t, p, req); err != nil {
		t.Fatal(err)
	}
	if n, _ := mountsAt(t, req.Dir); n != 0 {
		t.Errorf("%d mounts left after TearDown", n)
	}
	if _, err := os.Lstat(req.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory still there after TearDown: %v", err)
	}
}

func TestTearDownKeepsForeignMounts(t *testing.T) {
	requireRoot(t)
	p := emptydir.New(emptydir.Options{})
	req := request(t, nil, emptyDirVolume("scratch", v1.StorageMediumDefault, ""))
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(req.Dir, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", inner, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(inner, 0) })
	if err := os.WriteFile(filepath.Join(inner, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tearDown(t, p, req); err == nil {
		t.Fatal("TearDown removed a directory with a mount below it")
	}
	if _, err := os.Stat(filepath.Join(inner, "precious")); err != nil {
		t.Errorf("a file of the inner mount was removed: %v", err)
	}
}

func TestMediumNotSupported(t *testing.T) {
	p := emptydir.New(emptydir.Options{})
	req := request(t, nil, emptyDirVolume("huge", v1.StorageMediumHugePages, ""))
	if _, err := p.SetUp(t.Context(), req); !errors.Is(err, volume.ErrInvalid) {
		t.Errorf("SetUp of a HugePages volume: err %v, want ErrInvalid", err)
	}
}

func TestMemorySize(t *testing.T) {
	mem := func(s string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(s)}}
	}
	always := v1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name  string
		pod   v1.PodSpec
		limit string
		want  int64
	}{
		{name: "nothing set", pod: v1.PodSpec{Containers: []v1.Container{{}}}, want: 0},
		{name: "sizeLimit only", pod: v1.PodSpec{Containers: []v1.Container{{}}}, limit: "64Mi", want: 64 << 20},
		{name: "pod limit only", pod: v1.PodSpec{Containers: []v1.Container{{Resources: mem("100Mi")}, {Resources: mem("28Mi")}}}, want: 128 << 20},
		{name: "a container without limit", pod: v1.PodSpec{Containers: []v1.Container{{Resources: mem("100Mi")}, {}}}, limit: "", want: 0},
		{name: "smaller sizeLimit wins", pod: v1.PodSpec{Containers: []v1.Container{{Resources: mem("100Mi")}}}, limit: "10Mi", want: 10 << 20},
		{name: "smaller pod limit wins", pod: v1.PodSpec{Containers: []v1.Container{{Resources: mem("100Mi")}}}, limit: "1Gi", want: 100 << 20},
		{
			name: "large init container",
			pod: v1.PodSpec{
				InitContainers: []v1.Container{{Resources: mem("500Mi")}},
				Containers:     []v1.Container{{Resources: mem("100Mi")}},
			},
			want: 500 << 20,
		},
		{
			name: "sidecars add up",
			pod: v1.PodSpec{
				InitContainers: []v1.Container{{Resources: mem("50Mi"), RestartPolicy: &always}},
				Containers:     []v1.Container{{Resources: mem("100Mi")}},
				Overhead:       v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")},
			},
			want: 160 << 20,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tc.pod}
			if got := emptydir.MemorySize(pod, emptyDirVolume("v", v1.StorageMediumMemory, tc.limit)); got != tc.want {
				t.Errorf("MemorySize = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPluginSuite(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		vols := []v1.Volume{*emptyDirVolume("scratch", v1.StorageMediumDefault, "")}
		if os.Geteuid() == 0 {
			vols = append(vols, *emptyDirVolume("memory", v1.StorageMediumMemory, "1Mi"))
		}
		return volumetest.Fixture{
			Plugin:      emptydir.New(emptydir.Options{}),
			Volumes:     vols,
			Unsupported: []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}}},
		}
	})
}
