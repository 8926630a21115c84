package projection

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volume"
)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

// show turns files into "content mode" strings, for comparing.
func show(files Files) map[string]string {
	out := map[string]string{}
	for p, f := range files {
		out[p] = string(f.Data) + " " + modeString(f.Mode)
	}
	return out
}

func modeString(m fs.FileMode) string { return fmt.Sprintf("%#o", uint32(m)) }

func TestKeyFiles(t *testing.T) {
	data := map[string][]byte{"a": []byte("A"), "b": []byte("B"), ".c": []byte("C")}
	for _, tc := range []struct {
		name        string
		data        map[string][]byte
		items       []v1.KeyToPath
		defaultMode *int32
		optional    bool
		want        map[string]string
		wantErr     string
		invalid     bool
	}{
		{name: "every key", data: data, want: map[string]string{"a": "A 0644", "b": "B 0644", ".c": "C 0644"}},
		{name: "defaultMode", data: data, defaultMode: i32(0o400), want: map[string]string{"a": "A 0400", "b": "B 0400", ".c": "C 0400"}},
		{name: "no data", want: map[string]string{}},
		{
			name: "items",
			data: data,
			items: []v1.KeyToPath{
				{Key: "a", Path: "dir/a.txt"},
				{Key: "b", Path: "b", Mode: i32(0o600)},
			},
			defaultMode: i32(0o440),
			want:        map[string]string{"dir/a.txt": "A 0440", "b": "B 0600"},
		},
		{name: "missing key", data: data, items: []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "z", Path: "z"}}, wantErr: `configMap ns/cm has no key "z"`},
		{name: "missing key, optional", data: data, items: []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "z", Path: "z"}}, optional: true, want: map[string]string{"a": "A 0644"}},
		{name: "path escaping", data: data, items: []v1.KeyToPath{{Key: "a", Path: "../a"}}, wantErr: "must not contain '..'", invalid: true},
		{name: "absolute path", data: data, items: []v1.KeyToPath{{Key: "a", Path: "/etc/a"}}, wantErr: "must be relative", invalid: true},
		{name: "reserved path", data: data, items: []v1.KeyToPath{{Key: "a", Path: "..data"}}, wantErr: "must not start with '..'", invalid: true},
		{name: "reserved key", data: map[string][]byte{"..data": nil}, wantErr: "must not start with '..'", invalid: true},
		{name: "mode too large", data: data, items: []v1.KeyToPath{{Key: "a", Path: "a", Mode: i32(0o1777)}}, wantErr: "mode 01777", invalid: true},
		{name: "defaultMode negative", data: data, defaultMode: i32(-1), wantErr: "defaultMode", invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := KeyFiles("configMap ns/cm", tc.data, tc.items, tc.defaultMode, tc.optional)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				if volume.IsPermanent(err) != tc.invalid {
					t.Errorf("IsPermanent(%v) = %v, want %v", err, volume.IsPermanent(err), tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, show(files)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigMapData(t *testing.T) {
	cm := &v1.ConfigMap{Data: map[string]string{"text": "t"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	want := map[string][]byte{"text": []byte("t"), "bin": {0, 1}}
	if diff := cmp.Diff(want, ConfigMapData(cm)); diff != "" {
		t.Errorf("ConfigMapData (-want +got):\n%s", diff)
	}
}

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "a.b": "x", "a": "y"},
			Annotations: map[string]string{"note": "line1\nline2 \"quoted\"", "example.com/k": "v"},
		},
		Spec: v1.PodSpec{
			NodeName:           "node-1",
			ServiceAccountName: "builder",
			InitContainers: []v1.Container{{
				Name:      "init",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}},
			}},
			Containers: []v1.Container{{
				Name: "app",
				Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{
						v1.ResourceCPU:                   resource.MustParse("1500m"),
						v1.ResourceMemory:                resource.MustParse("128Mi"),
						v1.ResourceName("hugepages-2Mi"): resource.MustParse("4Mi"),
					},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				},
			}, {Name: "bare"}},
		},
		Status: v1.PodStatus{
			PodIP: "10.0.0.5", PodIPs: []v1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}},
			HostIP: "192.168.1.2", HostIPs: []v1.HostIP{{IP: "192.168.1.2"}},
		},
	}
}

func TestDownwardAPIFiles(t *testing.T) {
	pod := testPod()
	items := []v1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "meta/labels", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}, Mode: i32(0o400)},
		{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
	}
	files, err := DownwardAPIFiles(items, pod, i32(0o444), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name":        "web 0444",
		"meta/labels": "a=\"y\"\na.b=\"x\"\napp=\"web\" 0400",
		"cpu":         "1500 0444",
	}
	if diff := cmp.Diff(want, show(files)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		item v1.DownwardAPIVolumeFile
	}{
		{"no ref", v1.DownwardAPIVolumeFile{Path: "x"}},
		{"both refs", v1.DownwardAPIVolumeFile{Path: "x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}, ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu"}}},
		{"apiVersion", v1.DownwardAPIVolumeFile{Path: "x", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}},
		{"no container", v1.DownwardAPIVolumeFile{Path: "x", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{"bad path", v1.DownwardAPIVolumeFile{Path: "/x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DownwardAPIFiles([]v1.DownwardAPIVolumeFile{tc.item}, pod, nil, nil); !errors.Is(err, volume.ErrInvalid) {
				t.Errorf("err %v, want ErrInvalid", err)
			}
		})
	}
}

func TestFsUser(t *testing.T) {
	sc := func(uid *int64) *v1.SecurityContext { return &v1.SecurityContext{RunAsUser: uid} }
	for _, tc := range []struct {
		name string
		pod  v1.PodSpec
		want *int64
	}{
		{name: "nothing set", pod: v1.PodSpec{Containers: []v1.Container{{}}}},
		{name: "pod level", pod: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(1000)}, Containers: []v1.Container{{}, {}}}, want: i64(1000)},
		{name: "containers agree", pod: v1.PodSpec{InitContainers: []v1.Container{{SecurityContext: sc(i64(7))}}, Containers: []v1.Container{{SecurityContext: sc(i64(7))}}}, want: i64(7)},
		{name: "containers differ", pod: v1.PodSpec{Containers: []v1.Container{{SecurityContext: sc(i64(7))}, {SecurityContext: sc(i64(8))}}}},
		{name: "one unset", pod: v1.PodSpec{Containers: []v1.Container{{SecurityContext: sc(i64(7))}, {}}}},
		{name: "container overrides pod", pod: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(1)}, Containers: []v1.Container{{SecurityContext: sc(i64(2))}, {SecurityContext: sc(i64(2))}}}, want: i64(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FsUser(&v1.Pod{Spec: tc.pod})); diff != "" {
				t.Errorf("FsUser (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMode(t *testing.T) {
	if m, err := Mode(nil, 0o644); err != nil || m != 0o644 {
		t.Errorf("Mode(nil) = %v, %v", m, err)
	}
	if m, err := Mode(i32(0o400), 0o644); err != nil || m != 0o400 {
		t.Errorf("Mode(0400) = %v, %v", m, err)
	}
	if _, err := Mode(i32(0o1000), 0o644); !errors.Is(err, volume.ErrInvalid) {
		t.Errorf("Mode(01000): %v, want ErrInvalid", err)
	}
}
