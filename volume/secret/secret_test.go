package secret_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	pt "github.com/nodekit/nodekit/volume/internal/projectiontest"
	"github.com/nodekit/nodekit/volume/secret"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func i32(v int32) *int32 { return &v }
func yes() *bool         { b := true; return &b }

func newSecret(name string, data map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func secretVolume(name, secretName string, items []v1.KeyToPath, optional *bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: secretName, Items: items, Optional: optional,
	}}}
}

func newPlugin(t *testing.T, opts secret.Options, objs ...*v1.Secret) (*secret.Plugin, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, o := range objs {
		if _, err := client.CoreV1().Secrets(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.New(t)
	}
	p, err := secret.NewForClient(clientset.From(client), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, client
}

func TestSetUp(t *testing.T) {
	creds := newSecret("creds", map[string]string{"user": "admin", "password": "s3cret"})
	for _, tc := range []struct {
		name    string
		vol     v1.Volume
		want    map[string]string
		wantErr string
	}{
		{name: "every key", vol: secretVolume("s", "creds", nil, nil), want: map[string]string{"user": "admin 0644", "password": "s3cret 0644"}},
		{
			name: "items and modes",
			vol: func() v1.Volume {
				v := secretVolume("s", "creds", []v1.KeyToPath{{Key: "password", Path: "db/pass", Mode: i32(0o400)}, {Key: "user", Path: "user"}}, nil)
				v.Secret.DefaultMode = i32(0o600)
				return v
			}(),
			want: map[string]string{"db/pass": "s3cret 0400", "user": "admin 0600"},
		},
		{name: "optional and missing", vol: secretVolume("s", "absent", nil, yes()), want: map[string]string{}},
		{name: "missing", vol: secretVolume("s", "absent", nil, nil), wantErr: `secret: volume s: getting secret default/absent: secrets "absent" not found`},
		{name: "missing key", vol: secretVolume("s", "creds", []v1.KeyToPath{{Key: "token", Path: "t"}}, nil), wantErr: `secret: volume s: secret default/creds has no key "token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newPlugin(t, secret.Options{NoTmpfs: true}, creds)
			req := pt.Request(t, secret.PluginName, pt.Pod("web", tc.vol), &tc.vol)
			m, err := p.SetUp(t.Context(), req)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("SetUp: err %v, want %q", err, tc.wantErr)
				}
				if volume.IsPermanent(err) {
					t.Errorf("a missing secret or key is permanent; the manager would not retry: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !m.ReadOnly || m.HostPath != req.Dir {
				t.Errorf("Mount = %+v, want %s read-only", m, req.Dir)
			}
			if diff := cmp.Diff(tc.want, pt.Files(t, req.Dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTmpfs(t *testing.T) {
	pt.RequireRoot(t)
	p, client := newPlugin(t, secret.Options{}, newSecret("creds", map[string]string{"k": "v1"}))
	vol := secretVolume("s", "creds", nil, nil)
	req := pt.Request(t, secret.PluginName, pt.Pod("web", vol), &vol)
	t.Cleanup(func() { _ = p.TearDown(t.Context(), pt.TearDownRequest(req)) })
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if typ := pt.MountType(t, req.Dir); typ != "tmpfs" {
		t.Fatalf("the secret volume is on %q, want a tmpfs", typ)
	}
	first := pt.DataDir(t, req.Dir)

	// An update is written on the same tmpfs, swapped in.
	if _, err := client.CoreV1().Secrets("default").Update(t.Context(), newSecret("creds", map[string]string{"k": "v2"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := pt.DataDir(t, req.Dir); got == first {
		t.Error("..data did not move after the secret changed")
	}
	if diff := cmp.Diff(map[string]string{"k": "v2 0644"}, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if typ := pt.MountType(t, req.Dir); typ != "tmpfs" {
		t.Errorf("after the update the volume is on %q, want the tmpfs", typ)
	}

	if err := p.TearDown(t.Context(), pt.TearDownRequest(req)); err != nil {
		t.Fatal(err)
	}
	if typ := pt.MountType(t, req.Dir); typ != "" {
		t.Errorf("a %s is still mounted after TearDown", typ)
	}
	if _, err := os.Lstat(req.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the volume's directory is still there: %v", err)
	}
}

func TestNoTmpfs(t *testing.T) {
	var mu sync.Mutex
	var warnings []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, args)
	}, funcr.Options{})
	p, _ := newPlugin(t, secret.Options{NoTmpfs: true, Logger: log}, newSecret("creds", map[string]string{"k": "v"}))
	vol := secretVolume("s", "creds", nil, nil)
	req := pt.Request(t, secret.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	other := pt.Request(t, secret.PluginName, pt.Pod("other", vol), &vol)
	if _, err := p.SetUp(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "not to a tmpfs") {
		t.Errorf("warnings %q, want one saying the volumes are not on a tmpfs", warnings)
	}
	mu.Unlock()
	if typ := pt.MountType(t, req.Dir); typ != "" {
		t.Errorf("NoTmpfs: the volume is on a %s mount", typ)
	}
	if b, err := os.ReadFile(filepath.Join(req.Dir, "k")); err != nil || string(b) != "v" {
		t.Errorf("k = %q, %v", b, err)
	}
}

func TestPluginSuite(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		s := newSecret("creds", map[string]string{"k": "v"})
		s.Namespace = "volumetest"
		p, _ := newPlugin(t, secret.Options{}, s)
		return volumetest.Fixture{
			Plugin: p,
			Volumes: []v1.Volume{
				secretVolume("s", "creds", nil, nil),
				secretVolume("optional", "absent", nil, yes()),
			},
			Unsupported: []v1.Volume{{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}},
		}
	})
}
