package volume_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/hostpath"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount (CI runs as root)")
	}
}

// physDir is a temporary directory, symlinks resolved.
func physDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type env struct {
	root  string // the manager's RootDir
	host  string // a directory for host paths
	m     *volume.Manager
	fake  *volumetest.FakePlugin
	dirs  volume.PodDirs
	logMu sync.Mutex
	logs  []string
}

func (e *env) logged() []string {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	return append([]string(nil), e.logs...)
}

// newEnv builds a Manager with the fake plugin (for "fake" volumes: those
// with an empty EmptyDir medium "fake"... see isFake), hostpath (allowed
// only under host unless allowAll) and emptydir.
func newEnv(t *testing.T, mutate func(*volume.Options)) *env {
	t.Helper()
	e := &env{root: physDir(t), host: physDir(t)}
	e.fake = &volumetest.FakePlugin{PluginName: "nodekit.io/fake", Supports: isFake}
	// hostPath volumes are bound under the pod directory as root (CI runs
	// the tests as root).
	hp, err := hostpath.New(hostpath.Options{AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: e.host}}, NoBind: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	opts := volume.Options{
		Plugins: []volume.Plugin{e.fake, hp, emptydir.New(emptydir.Options{})},
		Logger: funcr.New(func(prefix, args string) {
			e.logMu.Lock()
			e.logs = append(e.logs, prefix+" "+args)
			e.logMu.Unlock()
		}, funcr.Options{Verbosity: 1}),
	}
	if mutate != nil {
		mutate(&opts)
	}
	e.m, err = volume.NewManager(e.root, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.dirs = e.m.PodDirs()
	t.Cleanup(func() {
		// Leave no mount behind.
		for _, uid := range []types.UID{"uid-web", "uid-a", "uid-b"} {
			_ = e.m.ReleasePod(context.WithoutCancel(t.Context()), uid)
		}
	})
	return e
}

// Fake volumes are flex volumes with driver "fake".
func isFake(v *v1.Volume) bool { return v.FlexVolume != nil && v.FlexVolume.Driver == "fake" }

func fakeVol(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{FlexVolume: &v1.FlexVolumeSource{Driver: "fake"}}}
}

func hostVol(name, path string, typ v1.HostPathType) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

func emptyVol(name string, medium v1.StorageMedium) v1.Volume {
	v := v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: medium}}}
	if medium == v1.StorageMediumMemory {
		q := resource.MustParse("1Mi")
		v.EmptyDir.SizeLimit = &q
	}
	return v
}

// newPod is a pod whose container "app" mounts every volume at
// /mnt/<name>.
func newPod(uid types.UID, vols ...v1.Volume) *v1.Pod {
	c := v1.Container{Name: "app", Image: "busybox"}
	for _, v := range vols {
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: vols, Containers: []v1.Container{c}}}
	pod.Name, pod.Namespace, pod.UID = "web", "default", uid
	return pod
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestWaitForPodVolumes(t *testing.T) {
	e := newEnv(t, nil)
	if err := os.Mkdir(filepath.Join(e.host, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	pod := newPod("uid-web",
		hostVol("data", filepath.Join(e.host, "data"), v1.HostPathDirectory),
		emptyVol("scratch", ""),
		fakeVol("fake"),
	)
	// A volume no container mounts is ignored, as in the kubelet, even
	// when no plugin could set it up.
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "unused", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}})

	got, err := e.m.WaitForPodVolumes(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(e.host, "data")
	if os.Geteuid() == 0 {
		data = filepath.Join(e.root, "pods/uid-web/volumes/kubernetes.io~host-path/data")
	}
	want := map[string]volume.Mount{
		"data":    {Name: "data", HostPath: data},
		"scratch": {Name: "scratch", HostPath: filepath.Join(e.root, "pods/uid-web/volumes/kubernetes.io~empty-dir/scratch")},
		"fake":    {Name: "fake", HostPath: filepath.Join(e.root, "pods/uid-web/volumes/nodekit.io~fake/fake")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, e.m.PodVolumes("uid-web")); diff != "" {
		t.Errorf("PodVolumes (-want +got):\n%s", diff)
	}
	for _, d := range []string{"volumes", "plugins", "containers"} {
		fi, err := os.Stat(filepath.Join(e.root, "pods/uid-web", d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("pod directory %s: %v, %v; want a 0750 directory", d, fi, err)
		}
	}
	// A second wait sets nothing up again.
	if _, err := e.m.WaitForPodVolumes(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if n := len(e.fake.Calls()); n != 1 {
		t.Errorf("the fake plugin got %d calls, want 1 SetUp", n)
	}
}

func TestWaitForPodVolumesWithoutVolumes(t *testing.T) {
	e := newEnv(t, nil)
	got, err := e.m.WaitForPodVolumes(t.Context(), newPod("uid-web"))
	if err != nil || len(got) != 0 {
		t.Fatalf("WaitForPodVolumes = %v, %v; want no mounts", got, err)
	}
	if !exists(e.dirs.Containers("uid-web")) {
		t.Error("the pod directory was not created")
	}
}

func TestWaitReportsBadVolumes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		vols      []v1.Volume
		wantMsg   string // with $HOST for the allowed host directory
		wantClass error
	}{
		{
			name:      "outside the allowed host paths",
			vols:      []v1.Volume{hostVol("data", "/etc/shadow", v1.HostPathUnset), emptyVol("scratch", "")},
			wantMsg:   "volume: pod default/web: unmounted volumes=[data], error: data: hostpath: volume data: /etc/shadow is outside the allowed host paths [$HOST]",
			wantClass: volume.ErrNotAllowed,
		},
		{
			name:      "no plugin",
			vols:      []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}, emptyVol("scratch", "")},
			wantMsg:   "volume: pod default/web: unmounted volumes=[config], error: config: volume: no volume plugin for volume config (configMap)",
			wantClass: volume.ErrNoPlugin,
		},
		{
			name:      "no source",
			vols:      []v1.Volume{{Name: "nothing"}},
			wantMsg:   "volume: pod default/web: unmounted volumes=[nothing], error: nothing: volume: no volume plugin for volume nothing (no source)",
			wantClass: volume.ErrNoPlugin,
		},
		{
			name: "two bad volumes",
			vols: []v1.Volume{
				hostVol("b-host", "relative/path", v1.HostPathDirectory),
				{Name: "a-secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
			},
			wantMsg:   `volume: pod default/web: unmounted volumes=[a-secret b-host], errors: a-secret: volume: no volume plugin for volume a-secret (secret); b-host: hostpath: volume b-host: path "relative/path" must be absolute`,
			wantClass: volume.ErrInvalid,
		},
		{
			name:      "volume name that is not a directory name",
			vols:      []v1.Volume{emptyVol("..", "")},
			wantMsg:   `volume: pod default/web: unmounted volumes=[..], error: ..: volume: volume name ".." cannot be a directory name`,
			wantClass: volume.ErrInvalid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				start := time.Now()
				_, err := e.m.WaitForPodVolumes(t.Context(), newPod("uid-web", tc.vols...))
				if time.Since(start) != 0 {
					t.Errorf("waited %v; an error that retrying does not cure must end the wait at once", time.Since(start))
				}
				var werr *volume.WaitError
				if !errors.As(err, &werr) {
					t.Fatalf("err %v, want a *WaitError", err)
				}
				if want := strings.ReplaceAll(tc.wantMsg, "$HOST", e.host); err.Error() != want {
					t.Errorf("error:\n%s\nwant:\n%s", err, want)
				}
				if !errors.Is(err, tc.wantClass) || !volume.IsPermanent(err) {
					t.Errorf("errors.Is(err, %v) = false", tc.wantClass)
				}
			})
		})
	}
}

func TestWaitRejectsUnsafePodUID(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.m.WaitForPodVolumes(t.Context(), newPod("../../escape", emptyVol("scratch", "")))
	if !errors.Is(err, volume.ErrInvalid) || !strings.Contains(err.Error(), `pod UID "../../escape" cannot be a directory name`) {
		t.Fatalf("err %v, want ErrInvalid naming the UID", err)
	}
	if exists(filepath.Join(e.root, "escape")) || exists(filepath.Join(filepath.Dir(e.root), "escape")) {
		t.Error("a directory was created outside the pods directory")
	}
	if err := e.m.ReleasePod(t.Context(), "../../escape"); err != nil {
		t.Errorf("ReleasePod of the pod: %v", err)
	}
}

func TestWaitTimesOutWithBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.fake.FailSetUp("flaky", errors.New("device busy"))
		start := time.Now()
		_, err := e.m.WaitForPodVolumes(t.Context(), newPod("uid-web", fakeVol("flaky")))
		if d := time.Since(start); d != 2*time.Minute+3*time.Second {
			t.Errorf("gave up after %v, want the kubelet's 2m3s", d)
		}
		want := "volume: pod default/web: unmounted volumes=[flaky], error: flaky: device busy (timed out after 2m3s: context deadline exceeded)"
		if err == nil || err.Error() != want {
			t.Errorf("error:\n%v\nwant:\n%s", err, want)
		}
		if !errors.Is(err, context.DeadlineExceeded) || volume.IsPermanent(err) {
			t.Errorf("err %v: want context.DeadlineExceeded, not permanent", err)
		}
		// Attempts at 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 and 63.5s: 500ms
		// doubling.
		if n := len(e.fake.Calls()); n != 8 {
			t.Errorf("%d set-up attempts in 2m3s, want 8", n)
		}
	})
}

func TestWaitSucceedsOnceTheVolumeRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.fake.FailSetUp("flaky", errors.New("device busy"))
		go func() {
			time.Sleep(time.Second)
			e.fake.FailSetUp("flaky", nil)
		}()
		start := time.Now()
		got, err := e.m.WaitForPodVolumes(t.Context(), newPod("uid-web", fakeVol("flaky")))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got["flaky"]; !ok {
			t.Errorf("mounts %v lack the volume", got)
		}
		// Retries at 0.5s (fails) and 1.5s (succeeds), seen at the next
		// 300ms poll.
		if d := time.Since(start); d < 1500*time.Millisecond || d > 1800*time.Millisecond {
			t.Errorf("succeeded after %v, want 1.5s to 1.8s", d)
		}
	})
}

func TestWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.fake.FailSetUp("flaky", errors.New("device busy"))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := e.m.WaitForPodVolumes(ctx, newPod("uid-web", fakeVol("flaky")))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "unmounted volumes=[flaky]") {
			t.Errorf("err %v, want the context's error with the volumes", err)
		}
	})
}

func TestReleasePod(t *testing.T) {
	requireRoot(t)
	e := newEnv(t, nil)
	hostData := filepath.Join(e.host, "data")
	if err := os.MkdirAll(hostData, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostData, "keep"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := newPod("uid-web",
		hostVol("data", hostData, v1.HostPathDirectory),
		emptyVol("scratch", ""),
		emptyVol("mem", v1.StorageMediumMemory),
		fakeVol("fake"),
	)
	pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
		v1.VolumeMount{Name: "scratch", MountPath: "/sub", SubPath: "a/b"})
	mounts, err := e.m.WaitForPodVolumes(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	cms, err := e.m.ContainerMounts(pod, &pod.Spec.Containers[0], mounts, nil)
	if err != nil {
		t.Fatal(err)
	}
	bind := cms[len(cms)-1].HostPath
	if n, _ := mountCount(t, bind); n != 1 {
		t.Fatalf("subPath bind %s not mounted", bind)
	}
	if n, typ := mountCount(t, mounts["mem"].HostPath); n != 1 || typ != "tmpfs" {
		t.Fatalf("Memory emptyDir not a tmpfs")
	}

	if err := e.m.ReleasePod(t.Context(), "uid-web"); err != nil {
		t.Fatal(err)
	}
	if exists(e.dirs.Pod("uid-web")) {
		t.Error("the pod directory is still there")
	}
	for _, p := range []string{bind, mounts["mem"].HostPath} {
		if n, _ := mountCount(t, p); n != 0 {
			t.Errorf("%s is still mounted", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(hostData, "keep")); err != nil || string(b) != "host" {
		t.Errorf("host data touched: %q, %v", b, err)
	}
	if got := e.m.PodVolumes("uid-web"); len(got) != 0 {
		t.Errorf("PodVolumes after release: %v", got)
	}
	if diff := cmp.Diff(volumetest.Call{Op: "TearDown", PodUID: "uid-web", Volume: "fake"}, e.fake.Calls()[1]); diff != "" {
		t.Errorf("fake plugin call (-want +got):\n%s", diff)
	}
	// Releasing again, or a pod never seen, is fine.
	if err := e.m.ReleasePod(t.Context(), "uid-web"); err != nil {
		t.Errorf("second ReleasePod: %v", err)
	}
	if err := e.m.ReleasePod(t.Context(), "uid-unknown"); err != nil {
		t.Errorf("ReleasePod of an unknown pod: %v", err)
	}
}

func TestReleasePodKeepsDirectoryWithForeignMount(t *testing.T) {
	requireRoot(t)
	e := newEnv(t, nil)
	pod := newPod("uid-web", emptyVol("scratch", ""))
	if _, err := e.m.WaitForPodVolumes(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(e.dirs.Plugins("uid-web"), "csi")
	mountTmpfs(t, foreign)
	if err := os.WriteFile(filepath.Join(foreign, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := e.m.ReleasePod(t.Context(), "uid-web")
	if err == nil || !strings.Contains(err.Error(), foreign) || !strings.Contains(err.Error(), "mounted") {
		t.Fatalf("ReleasePod with a foreign mount: err %v, want one naming %s", err, foreign)
	}
	if !exists(filepath.Join(foreign, "precious")) {
		t.Fatal("a file under the foreign mount was removed")
	}
	if exists(e.dirs.Volume("uid-web", emptydir.PluginName, "scratch")) {
		t.Error("the pod's emptyDir was not torn down")
	}
	if err := syscall.Unmount(foreign, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.m.ReleasePod(t.Context(), "uid-web"); err != nil {
		t.Fatalf("ReleasePod once unmounted: %v", err)
	}
	if exists(e.dirs.Pod("uid-web")) {
		t.Error("the pod directory is still there")
	}
}

func TestCleanupOrphans(t *testing.T) {
	requireRoot(t)
	e := newEnv(t, nil)
	// A pod the manager knows, desired.
	if _, err := e.m.WaitForPodVolumes(t.Context(), newPod("uid-a", emptyVol("scratch", ""))); err != nil {
		t.Fatal(err)
	}
	// Left by an earlier run of the agent:
	mk := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := mk(e.dirs.Volume("orphan-plain", emptydir.PluginName, "scratch"))
	if err := os.WriteFile(filepath.Join(plain, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A Memory emptyDir still mounted, and a subPath bind: torn down.
	mountTmpfs(t, mk(e.dirs.Volume("orphan-tmpfs", emptydir.PluginName, "mem")))
	mountTmpfs(t, mk(e.dirs.SubPath("orphan-tmpfs", "mem", "app", 0)))
	// Something no plugin of ours mounted: kept.
	foreign := mk(filepath.Join(e.dirs.Plugins("orphan-foreign"), "csi", "mnt"))
	mountTmpfs(t, foreign)
	mk(e.dirs.Containers("desired"))

	desired := map[types.UID]bool{"desired": true, "uid-a": true}
	for range 2 {
		if err := e.m.CleanupOrphans(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
	}
	for uid, want := range map[types.UID]bool{
		"orphan-plain":   false,
		"orphan-tmpfs":   false,
		"orphan-foreign": true,
		"desired":        true,
		"uid-a":          true,
	} {
		if got := exists(e.dirs.Pod(uid)); got != want {
			t.Errorf("pod directory %s exists: %v, want %v", uid, got, want)
		}
	}
	if !exists(foreign) {
		t.Error("the foreign mount point was removed")
	}
	var kept int
	for _, l := range e.logged() {
		if strings.Contains(l, "Orphaned pod directory kept") {
			kept++
			if !strings.Contains(l, "orphan-foreign") || !strings.Contains(l, foreign) {
				t.Errorf("log %q does not name the pod and the mount", l)
			}
		}
	}
	if kept != 1 {
		t.Errorf("the kept directory was logged %d times over two housekeepings, want once", kept)
	}
	if err := syscall.Unmount(foreign, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.m.CleanupOrphans(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	if exists(e.dirs.Pod("orphan-foreign")) {
		t.Error("the orphan was not removed once unmounted")
	}
}

// TestCleanupOrphansRereadsOnChange: after a housekeeping that left no
// orphan, the next one with the same desired pods does not read the pods
// directory again, until the desired pods change or ReconcilePeriod passes.
// TestCleanupOrphansReleasesUndesiredPods: a pod given to the Manager
// (AddPod, as the agent does for every pod it is sent) that housekeeping
// no longer lists is released by Run, its directory and volumes with it:
// a pod stopped before its worker started has nothing else to release it.
func TestCleanupOrphansReleasesUndesiredPods(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	pod := newPod("uid-b", emptyVol("scratch", ""))
	if _, err := e.m.WaitForPodVolumes(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if !exists(e.dirs.Pod("uid-b")) {
		t.Fatal("the pod has no directory")
	}
	// A pod with no volume, only given (its worker never started): Run
	// makes its directory.
	e.m.AddPod(newPod("uid-c"))
	deadline := time.Now().Add(10 * time.Second)
	for !exists(e.dirs.Pod("uid-c")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.m.CleanupOrphans(t.Context(), map[types.UID]bool{"uid-b": true, "uid-c": true}); err != nil {
		t.Fatal(err)
	}
	if !exists(e.dirs.Pod("uid-b")) || len(e.m.PodVolumes("uid-b")) != 1 {
		t.Fatal("housekeeping released a desired pod")
	}
	if err := e.m.CleanupOrphans(t.Context(), map[types.UID]bool{}); err != nil {
		t.Fatal(err)
	}
	// Run releases them at once: a bound for a loaded machine.
	deadline = time.Now().Add(10 * time.Second)
	for (exists(e.dirs.Pod("uid-b")) || exists(e.dirs.Pod("uid-c"))) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, uid := range []types.UID{"uid-b", "uid-c"} {
		if exists(e.dirs.Pod(uid)) {
			t.Errorf("the directory of pod %s, no longer desired, is left", uid)
		}
	}
	if n := len(e.m.PodVolumes("uid-b")); n != 0 {
		t.Errorf("the Manager still holds %d volumes of the pod", n)
	}
}

func TestCleanupOrphansRereadsOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *volume.Options) { o.ReconcilePeriod = time.Minute })
		orphan := func(uid types.UID) {
			t.Helper()
			if err := os.MkdirAll(e.dirs.Containers(uid), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		desired := map[types.UID]bool{"desired": true}
		orphan("desired")
		orphan("old")
		if err := e.m.CleanupOrphans(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		if exists(e.dirs.Pod("old")) || !exists(e.dirs.Pod("desired")) {
			t.Fatal("the first housekeeping did not remove the orphan alone")
		}

		// Made behind the manager's back: not seen while nothing changes.
		orphan("sneaked")
		if err := e.m.CleanupOrphans(t.Context(), map[types.UID]bool{"desired": true}); err != nil {
			t.Fatal(err)
		}
		if !exists(e.dirs.Pod("sneaked")) {
			t.Fatal("the pods directory was read again with the same desired pods")
		}
		// The desired pods change: read again.
		if err := e.m.CleanupOrphans(t.Context(), map[types.UID]bool{"desired": true, "new": true}); err != nil {
			t.Fatal(err)
		}
		if exists(e.dirs.Pod("sneaked")) {
			t.Fatal("the orphan survived a housekeeping with other desired pods")
		}

		// The same desired pods, but ReconcilePeriod passed: read again.
		orphan("sneaked-again")
		if err := e.m.CleanupOrphans(t.Context(), map[types.UID]bool{"desired": true, "new": true}); err != nil {
			t.Fatal(err)
		}
		if !exists(e.dirs.Pod("sneaked-again")) {
			t.Fatal("the pods directory was read again with the same desired pods")
		}
		time.Sleep(time.Minute)
		if err := e.m.CleanupOrphans(t.Context(), map[types.UID]bool{"desired": true, "new": true}); err != nil {
			t.Fatal(err)
		}
		if exists(e.dirs.Pod("sneaked-again")) {
			t.Error("the orphan survived a housekeeping after ReconcilePeriod")
		}
	})
}

func TestCleanupOrphansWithoutPodsDirectory(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.m.CleanupOrphans(t.Context(), nil); err != nil {
		t.Errorf("CleanupOrphans before any pod: %v", err)
	}
}

// Run reconciles a pod at once after AddPod and RemovePod, and a failed
// set-up after its back-off; on a goroutine of its own and as a task of a
// periodic.Driver (Options.Periodic).
func TestRun(t *testing.T) {
	for _, driver := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", driver), func(t *testing.T) { testRun(t, driver) })
	}
}

func testRun(t *testing.T, driver bool) {
	synctest.Test(t, func(t *testing.T) {
		var d *periodic.Driver
		if driver {
			d = periodictest.Start(t)
		}
		e := newEnv(t, func(o *volume.Options) { o.Periodic = d })
		e.fake.FailSetUp("b", errors.New("not yet"))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.m.Run(ctx) }()

		pod := newPod("uid-web", fakeVol("a"), fakeVol("b"))
		e.m.AddPod(pod)
		synctest.Wait()
		if got := e.m.PodVolumes("uid-web"); len(got) != 1 || got["a"].HostPath == "" {
			t.Fatalf("after AddPod: PodVolumes %v, want a", got)
		}
		e.fake.FailSetUp("b", nil)
		time.Sleep(500 * time.Millisecond) // b's back-off
		synctest.Wait()
		if got := e.m.PodVolumes("uid-web"); len(got) != 2 {
			t.Fatalf("after b's back-off: PodVolumes %v, want a and b", got)
		}

		e.m.RemovePod("uid-web")
		synctest.Wait()
		if got := e.m.PodVolumes("uid-web"); len(got) != 0 {
			t.Errorf("after RemovePod: PodVolumes %v, want none", got)
		}
		if exists(e.dirs.Pod("uid-web")) {
			t.Error("after RemovePod: the pod directory is still there")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil on cancel", err)
		}
	})
}

func TestRunRetriesTearDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.m.Run(ctx) }()
		if _, err := e.m.WaitForPodVolumes(t.Context(), newPod("uid-web", fakeVol("a"))); err != nil {
			t.Fatal(err)
		}
		e.fake.FailTearDown("a", errors.New("busy"))
		if err := e.m.ReleasePod(t.Context(), "uid-web"); err == nil || !strings.Contains(err.Error(), "busy") {
			t.Fatalf("ReleasePod: err %v, want the teardown's", err)
		}
		if !exists(e.dirs.Pod("uid-web")) {
			t.Fatal("the pod directory was removed although a volume is still set up")
		}
		e.fake.FailTearDown("a", nil)
		time.Sleep(time.Second)
		synctest.Wait()
		if exists(e.dirs.Pod("uid-web")) {
			t.Error("Run did not finish the release")
		}
		cancel()
		<-done
	})
}

func TestRunStopsOnCancel(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestNewManagerOptions(t *testing.T) {
	fake := &volumetest.FakePlugin{}
	for _, tc := range []struct {
		name string
		root string
		opts volume.Options
		want string
	}{
		{name: "relative root", root: "var/lib", want: "must be absolute"},
		{name: "nil plugin", opts: volume.Options{Plugins: []volume.Plugin{nil}}, want: "Plugins[0] is nil"},
		{name: "duplicate plugins", opts: volume.Options{Plugins: []volume.Plugin{fake, fake}}, want: "two plugins named"},
		{name: "unnamed plugin", opts: volume.Options{Plugins: []volume.Plugin{volume.Funcs{}}}, want: "invalid name"},
		{name: "negative period", opts: volume.Options{ReconcilePeriod: -1}, want: "must be positive"},
		{name: "relative allowed host path", opts: volume.Options{AllowedHostPaths: []volume.AllowedHostPath{{PathPrefix: "srv"}}}, want: `allowed host path "srv" is not an absolute path`},
		{name: "allowed host path with ..", opts: volume.Options{AllowedHostPaths: []volume.AllowedHostPath{{PathPrefix: "/srv/../etc"}}}, want: "without '..'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := volume.NewManager(tc.root, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "volume: ") {
				t.Errorf("NewManager: err %v, want one containing %q", err, tc.want)
			}
		})
	}
	m, err := volume.NewManager("", volume.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.PodDirs().Pod("u"); got != "/var/lib/nodekit/pods/u" {
		t.Errorf("default pod directory %s, want /var/lib/nodekit/pods/u", got)
	}
}

func TestPodDirs(t *testing.T) {
	d := volume.PodDirs{Root: "/r"}
	got := []string{d.Pod("u"), d.Volumes("u"), d.Volume("u", "kubernetes.io/empty-dir", "v"), d.Plugins("u"), d.Containers("u"), d.SubPaths("u"), d.SubPath("u", "v", "c", 3)}
	want := []string{"/r/pods/u", "/r/pods/u/volumes", "/r/pods/u/volumes/kubernetes.io~empty-dir/v", "/r/pods/u/plugins", "/r/pods/u/containers", "/r/pods/u/volume-subpaths", "/r/pods/u/volume-subpaths/v/c/3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PodDirs (-want +got):\n%s", diff)
	}
	for name, ok := range map[string]bool{"abc": true, "": false, ".": false, "..": false, "a/b": false, "a\x00": false, "...": true} {
		if err := volume.CheckName("x", name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// mountCount counts the mounts on path, and returns the type of the last.
func mountCount(t *testing.T, path string) (int, string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n, typ := 0, ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			n++
			for i := range f {
				if f[i] == "-" && i+1 < len(f) {
					typ = f[i+1]
				}
			}
		}
	}
	return n, typ
}

func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, 0) })
}

func TestPodAddedAgainAfterRelease(t *testing.T) {
	e := newEnv(t, nil)
	pod := newPod("uid-web", fakeVol("a"), emptyVol("scratch", ""))
	for i := range 2 {
		mounts, err := e.m.WaitForPodVolumes(t.Context(), pod)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if len(mounts) != 2 || !exists(mounts["scratch"].HostPath) {
			t.Fatalf("round %d: mounts %v", i, mounts)
		}
		if err := e.m.ReleasePod(t.Context(), pod.UID); err != nil {
			t.Fatal(err)
		}
		if exists(e.dirs.Pod(pod.UID)) {
			t.Fatalf("round %d: pod directory left", i)
		}
	}
}

// TestConcurrentPods runs pods through their life in parallel while Run
// and housekeeping run: for the race detector, and to check that
// housekeeping never removes a pod being set up.
func TestConcurrentPods(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var bg sync.WaitGroup
	bg.Go(func() { _ = e.m.Run(ctx) })
	var mu sync.Mutex
	live := map[types.UID]bool{}
	bg.Go(func() {
		for ctx.Err() == nil {
			mu.Lock()
			desired := maps.Clone(live)
			mu.Unlock()
			if err := e.m.CleanupOrphans(ctx, desired); err != nil {
				t.Error(err)
			}
		}
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			uid := types.UID(fmt.Sprintf("uid-%d", i))
			mu.Lock()
			live[uid] = true
			mu.Unlock()
			pod := newPod(uid, fakeVol("a"), emptyVol("scratch", ""))
			for range 5 {
				mounts, err := e.m.WaitForPodVolumes(ctx, pod)
				if err != nil {
					t.Error(err)
					return
				}
				if err := os.WriteFile(filepath.Join(mounts["scratch"].HostPath, "f"), nil, 0o644); err != nil {
					t.Errorf("pod %s: writing into its emptyDir: %v", uid, err)
				}
				if err := e.m.ReleasePod(ctx, uid); err != nil {
					t.Error(err)
				}
			}
			mu.Lock()
			delete(live, uid)
			mu.Unlock()
		})
	}
	wg.Wait()
	cancel()
	bg.Wait()
	entries, _ := os.ReadDir(e.dirs.Pods())
	if len(entries) != 0 {
		t.Errorf("%d pod directories left", len(entries))
	}
}
