package volumetest_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func TestFakePluginConformance(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		return volumetest.Fixture{
			Plugin: &volumetest.FakePlugin{Supports: func(v *v1.Volume) bool { return v.EmptyDir != nil }},
			Volumes: []v1.Volume{
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "b", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
			Unsupported: []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}}},
		}
	})
}

func TestFuncsConformance(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		return volumetest.Fixture{
			Plugin: volume.Funcs{
				PluginName:     "example.com/dir",
				CanSupportFunc: func(v *v1.Volume) bool { return v.EmptyDir != nil },
				SetUpFunc: func(_ context.Context, req volume.SetUpRequest) (volume.Mount, error) {
					return volume.Mount{Name: req.Volume.Name, HostPath: req.Dir}, os.MkdirAll(req.Dir, 0o755)
				},
				TearDownFunc: func(_ context.Context, req volume.TearDownRequest) error { return os.RemoveAll(req.Dir) },
			},
			Volumes: []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		}
	})
}

func TestFakePlugin(t *testing.T) {
	var f volumetest.FakePlugin
	if f.Name() != volumetest.FakePluginName || !f.CanSupport(&v1.Volume{}) {
		t.Fatalf("zero FakePlugin: name %q, supports every volume %v", f.Name(), f.CanSupport(&v1.Volume{}))
	}
	boom := errors.New("boom")
	f.FailSetUp("a", boom)
	f.FailTearDown("b", boom)
	pod := &v1.Pod{}
	pod.UID = "u"
	dir := t.TempDir() + "/vol"
	if _, err := f.SetUp(t.Context(), volume.SetUpRequest{Pod: pod, Volume: &v1.Volume{Name: "a"}, Dir: dir}); !errors.Is(err, boom) {
		t.Errorf("SetUp(a): err %v, want boom", err)
	}
	if _, err := f.SetUp(t.Context(), volume.SetUpRequest{Pod: pod, Volume: &v1.Volume{Name: "b"}, Dir: dir}); err != nil {
		t.Errorf("SetUp(b): %v", err)
	}
	if err := f.TearDown(t.Context(), volume.TearDownRequest{PodUID: "u", Name: "b", Dir: dir}); !errors.Is(err, boom) {
		t.Errorf("TearDown(b): err %v, want boom", err)
	}
	f.FailSetUp("a", nil)
	if _, err := f.SetUp(t.Context(), volume.SetUpRequest{Pod: pod, Volume: &v1.Volume{Name: "a"}, Dir: dir}); err != nil {
		t.Errorf("SetUp(a) after clearing its failure: %v", err)
	}
	want := []volumetest.Call{
		{Op: "SetUp", PodUID: "u", Volume: "a"},
		{Op: "SetUp", PodUID: "u", Volume: "b"},
		{Op: "TearDown", PodUID: "u", Volume: "b"},
		{Op: "SetUp", PodUID: "u", Volume: "a"},
	}
	if diff := cmp.Diff(want, f.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
}
