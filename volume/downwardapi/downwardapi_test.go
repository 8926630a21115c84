package downwardapi_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/downwardapi"
	pt "github.com/nodekit/nodekit/volume/internal/projectiontest"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func i32(v int32) *int32 { return &v }

func field(path, fieldPath string) v1.DownwardAPIVolumeFile {
	return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: fieldPath}}
}

func daVolume(items ...v1.DownwardAPIVolumeFile) v1.Volume {
	return v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}}
}

func TestSetUp(t *testing.T) {
	vol := daVolume(
		field("name", "metadata.name"),
		field("namespace", "metadata.namespace"),
		field("labels", "metadata.labels"),
		field("tier", "metadata.labels['tier']"),
		field("node", "spec.nodeName"),
		v1.DownwardAPIVolumeFile{Path: "limits/mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
	)
	vol.DownwardAPI.DefaultMode = i32(0o444)
	vol.DownwardAPI.Items[0].Mode = i32(0o400)
	pod := pt.Pod("web", vol)
	pod.Labels = map[string]string{"app": "web", "tier": "front"}
	pod.Spec.NodeName = "node-1"

	calls := 0
	p := downwardapi.New(downwardapi.Options{
		NoTmpfs: true,
		NodeAllocatable: func() v1.ResourceList {
			calls++
			return v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")}
		},
	})
	req := pt.Request(t, downwardapi.PluginName, pod, &vol)
	m, err := p.SetUp(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !m.ReadOnly {
		t.Errorf("Mount %+v is not read-only", m)
	}
	want := map[string]string{
		"name":       "web 0400",
		"namespace":  "default 0444",
		"labels":     "app=\"web\"\ntier=\"front\" 0444",
		"tier":       "front 0444",
		"node":       "node-1 0444",
		"limits/mem": "2048 0444",
	}
	if diff := cmp.Diff(want, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if calls != 1 {
		t.Errorf("NodeAllocatable called %d times, want 1", calls)
	}
	first := pt.DataDir(t, req.Dir)

	// The same pod: nothing written.
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := pt.DataDir(t, req.Dir); got != first {
		t.Errorf("..data moved from %s to %s for an unchanged pod", first, got)
	}

	// The pod's labels change: a refresh with the new pod writes them.
	pod = pod.DeepCopy()
	pod.Labels["tier"] = "back"
	req.Pod = pod
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := pt.DataDir(t, req.Dir); got == first {
		t.Error("..data did not move after the labels changed")
	}
	want["labels"] = "app=\"web\"\ntier=\"back\" 0444"
	want["tier"] = "back 0444"
	if diff := cmp.Diff(want, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files after the label change (-want +got):\n%s", diff)
	}
}

func TestInvalid(t *testing.T) {
	p := downwardapi.New(downwardapi.Options{NoTmpfs: true})
	for _, vol := range []v1.Volume{
		daVolume(field("x", "spec.containers")),
		daVolume(field("../x", "metadata.name")),
		daVolume(v1.DownwardAPIVolumeFile{Path: "x", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}}),
	} {
		req := pt.Request(t, downwardapi.PluginName, pt.Pod("web", vol), &vol)
		if _, err := p.SetUp(t.Context(), req); !errors.Is(err, volume.ErrInvalid) {
			t.Errorf("SetUp(%+v): err %v, want ErrInvalid", vol.DownwardAPI.Items[0], err)
		}
	}
}

func TestTmpfs(t *testing.T) {
	pt.RequireRoot(t)
	p := downwardapi.New(downwardapi.Options{})
	vol := daVolume(field("name", "metadata.name"))
	req := pt.Request(t, downwardapi.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if typ := pt.MountType(t, req.Dir); typ != "tmpfs" {
		t.Errorf("the volume is on %q, want a tmpfs as the kubelet's", typ)
	}
	if err := p.TearDown(t.Context(), pt.TearDownRequest(req)); err != nil {
		t.Fatal(err)
	}
	if typ := pt.MountType(t, req.Dir); typ != "" {
		t.Errorf("a %s is still mounted after TearDown", typ)
	}
}

func TestPluginSuite(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		return volumetest.Fixture{
			Plugin:      downwardapi.New(downwardapi.Options{}),
			Volumes:     []v1.Volume{daVolume(field("name", "metadata.name"), field("annotations", "metadata.annotations"))},
			Unsupported: []v1.Volume{{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}},
		}
	})
}
