package process_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/backend"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/runtime/process/imagestore"
	"github.com/nodekit/nodekit/runtime/runtimesuite"
	"github.com/nodekit/nodekit/sources"
)

const busyboxRef = "docker.io/library/busybox:1.36"

// needRoot skips a test that needs root, unless NODEKIT_E2E_REQUIRED says
// it must run.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("NODEKIT_E2E_REQUIRED") != "" {
		t.Fatal("containers in images need root (NODEKIT_E2E_REQUIRED is set)")
	}
	t.Skip("containers in images need root (chroot, namespaces): run as root")
}

// busyboxLayout writes an OCI layout holding busybox:1.36 made of the
// host's busybox-static binary, its applets as hard links, as
// hack/containerd.sh makes the end-to-end tests' image.
func busyboxLayout(t *testing.T, dir string) {
	t.Helper()
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no /bin/busybox (install busybox-static): %v", err)
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Skipf("/bin/busybox --list: %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "etc/", "root/", "tmp/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode})
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	_ = tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd))})
	_, _ = tw.Write([]byte(passwd))
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))})
	_, _ = tw.Write(bin)
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			_ = tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeLink, Linkname: "bin/busybox"})
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// An uncompressed layer: decompressing busybox under the race
	// detector takes tens of seconds. The store's own tests use gzip.
	l := static.NewLayer(data, types.OCIUncompressedLayer)
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, ggcrv1.Config{Env: []string{"PATH=/bin", "IMAGE_VAR=from-image"}, Entrypoint: []string{"sh", "-c"}, Cmd: []string{"echo from-image-cmd"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": busyboxRef})); err != nil {
		t.Fatal(err)
	}
}

// newStore returns an image store in dir holding the busybox layout (not
// pulled).
func newStore(t *testing.T, dir string) *imagestore.Store {
	t.Helper()
	store, err := imagestore.New(imagestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	busyboxLayout(t, filepath.Join(store.ImportDir(), "busybox"))
	return store
}

// newImageRuntime returns a process runtime on stateDir with the image
// store.
func newImageRuntime(t *testing.T, stateDir string, store *imagestore.Store) *backend.Runtime {
	t.Helper()
	rt, err := process.New(process.Options{StateDir: stateDir, Images: store, Cgroups: new(bool), Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func waitExited(t *testing.T, rt *backend.Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := status(t, rt, id)
		if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %s after a minute", id, st.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logLines returns the messages of a CRI log file.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.SplitN(line, " ", 4); len(f) == 4 {
			out = append(out, f[3])
		}
	}
	return out
}

// TestContainerInImage, as root: busybox from an OCI layout is pulled
// into the store and listed; a container of it runs chrooted into the
// image (/ lists the image's files and the container's /dev and /proc
// only), with the pod's host name, as PID 1 of its own PID namespace,
// with the image's environment under its own; exec runs in the same
// namespaces and root; writes go to the container's layer, not the
// shared image; the image is removed. An image not in the store fails
// the pull as NotFound and the container's creation.
func TestContainerInImage(t *testing.T) {
	needRoot(t)
	storeDir := t.TempDir()
	began := time.Now()
	rt := newImageRuntime(t, t.TempDir(), newStore(t, storeDir))
	t.Logf("busybox layout built in %v", time.Since(began))
	t.Cleanup(func() { rt.Close() }) // after the sandbox's removal
	ctx := t.Context()

	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "missing:1"}, nil, nil); !runtime.IsNotFound(err) {
		t.Errorf("pull of an image in no layout: %v, want NotFound", err)
	}
	began = time.Now()
	id, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox:1.36"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("busybox pulled (unpacked) in %v", time.Since(began))
	imgs, err := rt.ListImages(ctx, nil)
	if err != nil || len(imgs) != 1 || imgs[0].Id != id || !slices.Contains(imgs[0].RepoTags, busyboxRef) || imgs[0].Size < 1<<20 {
		t.Fatalf("ListImages = %v, %v; want busybox %s", imgs, err, id)
	}

	rtp := &rt
	sb, sbCfg := pod(t, rtp)
	sbCfg.Hostname = "pod-host"
	// pod made the sandbox before the host name was set: make another.
	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if sb, err = rt.RunPodSandbox(ctx, sbCfg, ""); err != nil {
		t.Fatal(err)
	}
	defer rt.RemovePodSandbox(ctx, sb)

	if _, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "other:1"}, Command: []string{"true"},
	}, sbCfg); !runtime.IsNotFound(err) {
		t.Errorf("container of an image not in the store: %v, want NotFound", err)
	}

	mk := func(name string, argv ...string) string {
		cid, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: id},
			Command:  argv,
			Envs:     []*runtimeapi.KeyValue{{Key: "POD_VAR", Value: []byte("from-pod")}},
			LogPath:  name + "/0.log",
		}, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, cid); err != nil {
			t.Fatal(err)
		}
		return cid
	}
	one := mk("one", "sh", "-c", `hostname; ls /; echo pid $$; echo $IMAGE_VAR $POD_VAR; echo written > /bin/new-file; cat /bin/new-file`)
	if st := waitExited(t, rt, one); st.ExitCode != 0 {
		t.Fatalf("exit code %d: %s %s", st.ExitCode, st.Reason, st.Message)
	}
	got := logLines(t, filepath.Join(sbCfg.LogDirectory, "one/0.log"))
	want := []string{"pod-host", "bin", "dev", "etc", "proc", "root", "tmp", "pid 1", "from-image from-pod", "written"}
	if !slices.Equal(got, want) {
		t.Errorf("container output %q, want %q", got, want)
	}
	// No command: the image's entrypoint, with its Cmd unless the
	// container gives arguments.
	for name, args := range map[string][]string{"image-cmd": nil, "args": {"echo from-args"}} {
		cid, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: id},
			Args: args, LogPath: name + "/0.log",
		}, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, cid); err != nil {
			t.Fatal(err)
		}
		if st := waitExited(t, rt, cid); st.ExitCode != 0 {
			t.Fatalf("%s: exit code %d: %s %s", name, st.ExitCode, st.Reason, st.Message)
		}
		want := []string{"from-image-cmd"}
		if args != nil {
			want = []string{"from-args"}
		}
		if got := logLines(t, filepath.Join(sbCfg.LogDirectory, name+"/0.log")); !slices.Equal(got, want) {
			t.Errorf("%s: output %q, want %q", name, got, want)
		}
		if err := rt.RemoveContainer(ctx, cid); err != nil {
			t.Fatal(err)
		}
	}

	img, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: id}, false)
	if err != nil || img.GetImage() == nil {
		t.Fatalf("ImageStatus: %v, %v", img, err)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "images", strings.TrimPrefix(id, "sha256:"), "rootfs/bin/new-file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the container wrote into the shared image: %v", err)
	}

	long := mk("long", "sleep", "3600")
	stdout, _, err := rt.ExecSync(ctx, long, []string{"sh", "-c", "hostname; ls /; cat /proc/1/cmdline | tr '\\0' ' '"}, 30*time.Second)
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if want := "pod-host\nbin\ndev\netc\nproc\nroot\ntmp\nsleep 3600 "; string(stdout) != want {
		t.Errorf("exec output %q, want %q", stdout, want)
	}
	if _, _, err := rt.ExecSync(ctx, long, []string{"no-such-command"}, 30*time.Second); err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("exec of a missing command: %v", err)
	}
	if err := rt.StopContainer(ctx, long, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{one, long} {
		if err := rt.RemoveContainer(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: id}); err != nil {
		t.Fatal(err)
	}
	if imgs, _ := rt.ListImages(ctx, nil); len(imgs) != 0 {
		t.Errorf("images after removal: %v", imgs)
	}
}

// TestConformanceInImages runs the runtime conformance suite on the
// process runtime with an image store, as root: every container runs in
// busybox, unpacked from an OCI layout.
func TestConformanceInImages(t *testing.T) {
	needRoot(t)
	store := newStore(t, t.TempDir())
	if _, err := store.Pull(t.Context(), busyboxRef); err != nil {
		t.Fatal(err)
	}
	runtimesuite.Run(t, func(t *testing.T) runtimesuite.Config {
		dir := t.TempDir()
		var mu sync.Mutex
		rt := newImageRuntime(t, dir, store)
		t.Cleanup(func() { mu.Lock(); defer mu.Unlock(); rt.Close() })
		return runtimesuite.Config{
			Runtime:   rt,
			Image:     busyboxRef,
			Processes: true,
			Restart: func(t *testing.T) runtime.RuntimeService {
				mu.Lock()
				defer mu.Unlock()
				rt.Close()
				rt = newImageRuntime(t, dir, store)
				return rt
			},
		}
	})
}

// TestAgentInImages, as root: through the agent, a pod of busybox from
// the store's OCI layout is pulled, runs in its image with the pod's host
// name (an exec readiness probe checks it inside the container) and is
// Ready; a pod whose image is in no layout waits in ErrImagePull or
// ImagePullBackOff with a message that says where the image was looked
// for.
func TestAgentInImages(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	store := newStore(t, filepath.Join(dir, "images"))
	a := startAgentWith(t, dir, process.Options{Images: store, Cgroups: new(bool)})
	a.removeAllAtEnd(t, dir)
	good := shPod("inimage", v1.RestartPolicyAlways, nil, "exec sleep 3600")
	good.Spec.Containers[0].Image = "busybox:1.36"
	good.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
		Exec: &v1.ExecAction{Command: []string{"sh", "-c", `test "$(hostname)" = inimage`}}}}
	missing := shPod("missing", v1.RestartPolicyAlways, nil, "sleep 3600")
	missing.Spec.Containers[0].Image = "registry.example/missing:1"
	for _, p := range []*v1.Pod{good, missing} {
		// sleep, the pid namespace's init, ignores SIGTERM: the pods
		// go after a second, at the end.
		p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(1))
		sources.SetDefaults(p)
	}
	a.src <- []*v1.Pod{good, missing}

	wait(t, "the pod in busybox Ready", func() bool {
		for _, c := range a.status("inimage").Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	want := `"registry.example/missing:1" is in no OCI layout or image tarball of ` + store.ImportDir()
	wait(t, "the pod of a missing image waiting in ErrImagePull", func() bool {
		for _, c := range a.status("missing").ContainerStatuses {
			if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.Contains(w.Message, want) {
				return true
			}
		}
		return false
	})
}

// TestImagesNeedRoot: without root, a runtime with an image store is
// refused with an error that says why; host commands stay the default.
func TestImagesNeedRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("checks the refusal without root; this test runs as root")
	}
	store, err := imagestore.New(imagestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = process.New(process.Options{StateDir: t.TempDir(), Images: store})
	if err == nil || !strings.Contains(err.Error(), "Options.Images needs root") {
		t.Errorf("New with Images without root: %v", err)
	}
	rt, err := process.New(process.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("New without Images: %v", err)
	}
	rt.Close()
}
