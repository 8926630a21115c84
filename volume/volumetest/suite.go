package volumetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volume"
)

// Fixture is what PluginSuite tests: a plugin and volumes it handles.
type Fixture struct {
	// Plugin is the plugin under test, fresh for each test.
	Plugin volume.Plugin
	// Volumes are volumes the plugin supports and can set up on this host;
	// at least one.
	Volumes []v1.Volume
	// Unsupported are volumes the plugin must not claim. A volume with no
	// source is always checked too.
	Unsupported []v1.Volume
	// Pod is the pod the volumes belong to; the suite gives each copy its
	// own UID and adds Volumes to its spec. Defaults to a pod with one
	// container, "app", that mounts every volume read-write.
	Pod *v1.Pod
}

// PluginSuite runs the conformance tests of a volume.Plugin, each on the
// fixture newFixture returns (call t.TempDir there for host paths):
//
//   - Name is not empty, stable, and can be a directory name once escaped;
//   - CanSupport claims the fixture's volumes and no others;
//   - SetUp returns a Mount with the volume's name and an absolute host
//     path that exists, and returns the same Mount when called again (the
//     agent restarted);
//   - TearDown succeeds, leaves no Dir behind, succeeds again, and
//     succeeds for a volume never set up;
//   - a volume can be set up again after its teardown;
//   - SetUp and TearDown of different pods may run concurrently.
//
// The directories given to the plugin are laid out as the volume manager
// lays them out, under a temporary root.
func PluginSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	setup := func(t *testing.T) (Fixture, *harness) {
		t.Helper()
		f := newFixture(t)
		if f.Plugin == nil || len(f.Volumes) == 0 {
			t.Fatal("volumetest: the fixture needs a Plugin and at least one volume")
		}
		return f, &harness{t: t, f: f, dirs: volume.PodDirs{Root: t.TempDir()}}
	}

	t.Run("Name", func(t *testing.T) {
		f, _ := setup(t)
		name := f.Plugin.Name()
		if name == "" {
			t.Fatal("Name() is empty")
		}
		if err := volume.CheckName("plugin name", volume.EscapePluginName(name)); err != nil {
			t.Errorf("Name() %q cannot name a directory: %v", name, err)
		}
		if again := f.Plugin.Name(); again != name {
			t.Errorf("Name() changed from %q to %q", name, again)
		}
	})

	t.Run("CanSupport", func(t *testing.T) {
		f, _ := setup(t)
		for i := range f.Volumes {
			if !f.Plugin.CanSupport(&f.Volumes[i]) {
				t.Errorf("CanSupport(%s) = false, want true", f.Volumes[i].Name)
			}
		}
		unsupported := append([]v1.Volume{{Name: "no-source"}}, f.Unsupported...)
		for i := range unsupported {
			if f.Plugin.CanSupport(&unsupported[i]) {
				t.Errorf("CanSupport(%s) = true, want false", unsupported[i].Name)
			}
		}
	})

	t.Run("SetUp", func(t *testing.T) {
		f, h := setup(t)
		pod := h.pod("setup")
		for i := range f.Volumes {
			vol := &f.Volumes[i]
			m := h.setUp(pod, vol)
			if m.Name != vol.Name {
				t.Errorf("SetUp(%s).Name = %q, want %q", vol.Name, m.Name, vol.Name)
			}
			if !filepath.IsAbs(m.HostPath) {
				t.Errorf("SetUp(%s).HostPath = %q, want an absolute path", vol.Name, m.HostPath)
			} else if _, err := os.Lstat(m.HostPath); err != nil {
				t.Errorf("SetUp(%s).HostPath does not exist: %v", vol.Name, err)
			}
		}
	})

	t.Run("SetUpIdempotent", func(t *testing.T) {
		f, h := setup(t)
		pod := h.pod("idempotent")
		for i := range f.Volumes {
			vol := &f.Volumes[i]
			first := h.setUp(pod, vol)
			second := h.setUp(pod, vol)
			if diff := cmp.Diff(first, second); diff != "" {
				t.Errorf("second SetUp(%s) returned another Mount (-first +second):\n%s", vol.Name, diff)
			}
		}
	})

	t.Run("TearDown", func(t *testing.T) {
		f, h := setup(t)
		pod := h.pod("teardown")
		for i := range f.Volumes {
			vol := &f.Volumes[i]
			h.setUp(pod, vol)
			h.tearDown(pod.UID, vol.Name)
			if _, err := os.Lstat(h.dir(pod.UID, vol.Name)); err == nil {
				t.Errorf("TearDown(%s) left its directory %s", vol.Name, h.dir(pod.UID, vol.Name))
			}
			h.tearDown(pod.UID, vol.Name)
		}
	})

	t.Run("TearDownNeverSetUp", func(t *testing.T) {
		f, h := setup(t)
		for i := range f.Volumes {
			h.tearDown("never-set-up", f.Volumes[i].Name)
		}
	})

	t.Run("SetUpAfterTearDown", func(t *testing.T) {
		f, h := setup(t)
		pod := h.pod("again")
		for i := range f.Volumes {
			vol := &f.Volumes[i]
			h.setUp(pod, vol)
			h.tearDown(pod.UID, vol.Name)
			m := h.setUp(pod, vol)
			if _, err := os.Lstat(m.HostPath); err != nil {
				t.Errorf("SetUp(%s) after TearDown: host path missing: %v", vol.Name, err)
			}
			h.tearDown(pod.UID, vol.Name)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		f, h := setup(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8*len(f.Volumes))
		for n := range 8 {
			pod := h.pod(fmt.Sprintf("concurrent-%d", n))
			wg.Go(func() {
				for i := range f.Volumes {
					vol := &f.Volumes[i]
					if _, err := f.Plugin.SetUp(t.Context(), h.request(pod, vol)); err != nil {
						errs <- fmt.Errorf("SetUp(%s) of pod %s: %w", vol.Name, pod.Name, err)
						continue
					}
					if err := f.Plugin.TearDown(t.Context(), volume.TearDownRequest{PodUID: pod.UID, Name: vol.Name, Dir: h.dir(pod.UID, vol.Name)}); err != nil {
						errs <- fmt.Errorf("TearDown(%s) of pod %s: %w", vol.Name, pod.Name, err)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

type harness struct {
	t    *testing.T
	f    Fixture
	dirs volume.PodDirs
}

func (h *harness) pod(name string) *v1.Pod {
	var pod *v1.Pod
	if h.f.Pod != nil {
		pod = h.f.Pod.DeepCopy()
	} else {
		c := v1.Container{Name: "app", Image: "busybox"}
		for _, v := range h.f.Volumes {
			c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
		}
		pod = &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	}
	pod.Name, pod.Namespace = name, "volumetest"
	pod.UID = types.UID("volumetest-" + name)
	pod.CreationTimestamp = metav1.Now()
	have := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		have[v.Name] = true
	}
	for _, v := range h.f.Volumes {
		if !have[v.Name] {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	return pod
}

func (h *harness) dir(uid types.UID, name string) string {
	return h.dirs.Volume(uid, h.f.Plugin.Name(), name)
}

func (h *harness) request(pod *v1.Pod, vol *v1.Volume) volume.SetUpRequest {
	dir := h.dir(pod.UID, vol.Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		h.t.Fatal(err)
	}
	return volume.SetUpRequest{Pod: pod, Volume: vol, Dir: dir}
}

func (h *harness) setUp(pod *v1.Pod, vol *v1.Volume) volume.Mount {
	h.t.Helper()
	ctx := context.WithoutCancel(h.t.Context())
	h.t.Cleanup(func() {
		// Leave no mount behind, whatever the test did.
		_ = h.f.Plugin.TearDown(ctx, volume.TearDownRequest{PodUID: pod.UID, Name: vol.Name, Dir: h.dir(pod.UID, vol.Name)})
	})
	m, err := h.f.Plugin.SetUp(ctx, h.request(pod, vol))
	if err != nil {
		h.t.Fatalf("SetUp(%s): %v", vol.Name, err)
	}
	return m
}

func (h *harness) tearDown(uid types.UID, name string) {
	h.t.Helper()
	if err := h.f.Plugin.TearDown(h.t.Context(), volume.TearDownRequest{PodUID: uid, Name: name, Dir: h.dir(uid, name)}); err != nil {
		h.t.Fatalf("TearDown(%s): %v", name, err)
	}
}
