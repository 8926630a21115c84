package configmap_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/configmap"
	pt "github.com/nodekit/nodekit/volume/internal/projectiontest"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func i32(v int32) *int32 { return &v }
func yes() *bool         { b := true; return &b }

func configMap(name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
}

func cmVolume(name, cm string, items []v1.KeyToPath, optional *bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cm},
		Items:                items,
		Optional:             optional,
	}}}
}

func newPlugin(t *testing.T, objs ...*v1.ConfigMap) (*configmap.Plugin, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, o := range objs {
		if _, err := client.CoreV1().ConfigMaps(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := configmap.NewForClient(clientset.From(client), configmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p, client
}

func TestSetUp(t *testing.T) {
	app := configMap("app", map[string]string{"config.yaml": "a: 1", "level": "debug"})
	app.BinaryData = map[string][]byte{"blob": {0xff, 0x00}}
	for _, tc := range []struct {
		name    string
		vol     v1.Volume
		want    map[string]string
		wantErr string
	}{
		{
			name: "every key",
			vol:  cmVolume("cfg", "app", nil, nil),
			want: map[string]string{"config.yaml": "a: 1 0644", "level": "debug 0644", "blob": "\xff\x00 0644"},
		},
		{
			name: "items and modes",
			vol: func() v1.Volume {
				v := cmVolume("cfg", "app", []v1.KeyToPath{{Key: "config.yaml", Path: "etc/app.yaml"}, {Key: "level", Path: "level", Mode: i32(0o600)}}, nil)
				v.ConfigMap.DefaultMode = i32(0o440)
				return v
			}(),
			want: map[string]string{"etc/app.yaml": "a: 1 0440", "level": "debug 0600"},
		},
		{name: "optional and missing", vol: cmVolume("cfg", "absent", nil, yes()), want: map[string]string{}},
		{name: "missing", vol: cmVolume("cfg", "absent", nil, nil), wantErr: `configmap: volume cfg: getting configMap default/absent: configmaps "absent" not found`},
		{name: "missing key", vol: cmVolume("cfg", "app", []v1.KeyToPath{{Key: "nope", Path: "nope"}}, nil), wantErr: `configmap: volume cfg: configMap default/app has no key "nope"`},
		{name: "missing key, optional", vol: cmVolume("cfg", "app", []v1.KeyToPath{{Key: "nope", Path: "nope"}, {Key: "level", Path: "l"}}, yes()), want: map[string]string{"l": "debug 0644"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newPlugin(t, app)
			pod := pt.Pod("web", tc.vol)
			req := pt.Request(t, configmap.PluginName, pod, &tc.vol)
			m, err := p.SetUp(t.Context(), req)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("SetUp: err %v, want %q", err, tc.wantErr)
				}
				if volume.IsPermanent(err) {
					t.Errorf("a missing configMap or key is permanent; the manager would not retry: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (volume.Mount{Name: "cfg", HostPath: req.Dir, ReadOnly: true}); m != want {
				t.Errorf("Mount = %+v, want %+v", m, want)
			}
			if diff := cmp.Diff(tc.want, pt.Files(t, req.Dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if pt.DataDir(t, req.Dir) == "" {
				t.Error("no ..data in the volume")
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	p, _ := newPlugin(t, configMap("app", map[string]string{"k": "v"}))
	for _, vol := range []v1.Volume{
		cmVolume("cfg", "app", []v1.KeyToPath{{Key: "k", Path: "../../etc/passwd"}}, nil),
		cmVolume("cfg", "", nil, nil),
		{Name: "cfg", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	} {
		req := pt.Request(t, configmap.PluginName, pt.Pod("web", vol), &vol)
		if _, err := p.SetUp(t.Context(), req); !errors.Is(err, volume.ErrInvalid) {
			t.Errorf("SetUp(%+v): err %v, want ErrInvalid", vol.VolumeSource, err)
		}
	}
}

func TestUpdate(t *testing.T) {
	p, client := newPlugin(t, configMap("app", map[string]string{"a": "1", "b": "1"}))
	vol := cmVolume("cfg", "app", nil, nil)
	req := pt.Request(t, configmap.PluginName, pt.Pod("web", vol), &vol)
	setUp := func() {
		t.Helper()
		if _, err := p.SetUp(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	setUp()
	first := pt.DataDir(t, req.Dir)

	setUp()
	if got := pt.DataDir(t, req.Dir); got != first {
		t.Errorf("..data moved from %s to %s though the configMap did not change", first, got)
	}

	if _, err := client.CoreV1().ConfigMaps("default").Update(t.Context(), configMap("app", map[string]string{"a": "2", "c": "new"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setUp()
	second := pt.DataDir(t, req.Dir)
	if second == first {
		t.Error("..data did not move after the configMap changed")
	}
	want := map[string]string{"a": "2 0644", "c": "new 0644"}
	if diff := cmp.Diff(want, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files after the update (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(req.Dir + "/" + first); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old data directory is still there: %v", err)
	}
}

func TestKeepsContentWhileAPIServerIsAway(t *testing.T) {
	var fail error
	get := configmap.GetterFunc(func(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
		if fail != nil {
			return nil, fail
		}
		return configMap(name, map[string]string{"k": "v"}), nil
	})
	p, err := configmap.New(get, configmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vol := cmVolume("cfg", "app", nil, nil)
	unavailable := apierrors.NewServiceUnavailable("etcd is down")

	// Never set up: the error is returned.
	fresh := pt.Request(t, configmap.PluginName, pt.Pod("fresh", vol), &vol)
	fail = unavailable
	if _, err := p.SetUp(t.Context(), fresh); err == nil {
		t.Fatal("SetUp of a new volume succeeded while the API server is away")
	}

	fail = nil
	req := pt.Request(t, configmap.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	fail = unavailable
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Errorf("SetUp of a volume with content while the API server is away: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"k": "v 0644"}, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	// A deleted configMap is not an outage.
	fail = apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "app")
	if _, err := p.SetUp(t.Context(), req); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("SetUp after the configMap was deleted: err %v, want not found", err)
	}
}

func TestFSGroup(t *testing.T) {
	pt.RequireRoot(t)
	p, _ := newPlugin(t, configMap("app", map[string]string{"k": "v"}))
	vol := cmVolume("cfg", "app", nil, nil)
	vol.ConfigMap.DefaultMode = i32(0o400)
	pod := pt.Pod("web", vol)
	gid := int64(5555)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	req := pt.Request(t, configmap.PluginName, pod, &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"k": "v 0440"}, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	for _, p := range []string{req.Dir, req.Dir + "/k"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int64(st.Gid) != gid {
			t.Errorf("%s: gid %d, want the fsGroup %d", p, st.Gid, gid)
		}
	}
}

func TestTearDown(t *testing.T) {
	p, _ := newPlugin(t, configMap("app", map[string]string{"k": "v"}))
	vol := cmVolume("cfg", "app", nil, nil)
	req := pt.Request(t, configmap.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := p.TearDown(t.Context(), pt.TearDownRequest(req)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(req.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the volume's directory is still there: %v", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := configmap.New(nil, configmap.Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := configmap.NewForClient(nil, configmap.Options{}); err == nil {
		t.Error("NewForClient(nil) succeeded")
	}
	p, _ := newPlugin(t)
	vol := cmVolume("cfg", "app", nil, nil)
	if !p.RequiresRefresh(&vol) || p.RequiresRefresh(&v1.Volume{}) {
		t.Error("RequiresRefresh is not true for configMap volumes only")
	}
}

func TestPluginSuite(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		cm := configMap("app", map[string]string{"k": "v"})
		cm.Namespace = "volumetest"
		p, _ := newPlugin(t, cm)
		return volumetest.Fixture{
			Plugin: p,
			Volumes: []v1.Volume{
				cmVolume("cfg", "app", nil, nil),
				cmVolume("optional", "absent", nil, yes()),
			},
			Unsupported: []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app"}}}},
		}
	})
}
