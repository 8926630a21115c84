package credentials

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/objects"
)

func dockerConfigJSONSecret(name, doc string) v1.Secret {
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(doc)},
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// users lists the usernames of creds, in order.
func users(creds []Credential) []string {
	var out []string
	for _, c := range creds {
		out = append(out, c.Username)
	}
	return out
}

func TestLookupMatching(t *testing.T) {
	cfg := Config{
		"registry.example.com":                 {Username: "host"},
		"https://registry.example.com/team":    {Username: "team"},
		"http://registry.example.com/team/app": {Username: "app"},
		"*.example.org":                        {Username: "glob"},
		"*.*.example.net":                      {Username: "glob2"},
		"localhost:5000":                       {Username: "port"},
		"https://127.0.0.1:5001/v2/":           {Username: "v2"},
		"https://index.docker.io/v1/":          {Username: "hub"},
		"quay.io/coreos":                       {Username: "coreos"},
		"quay.io":                              {Username: "quay"},
	}
	kr := &Keyring{}
	kr.Add(nil, cfg)
	for _, tc := range []struct {
		image string
		want  []string
	}{
		{"registry.example.com/team/app:1", []string{"app", "team", "host"}},
		{"registry.example.com/team/other", []string{"team", "host"}},
		{"registry.example.com/teamx/y", []string{"team", "host"}}, // a path prefix, as the kubelet's
		{"registry.example.com/other@sha256:" + strings.Repeat("a", 64), []string{"host"}},
		{"a.example.org/x", []string{"glob"}},
		{"a.b.example.org/x", nil}, // a glob matches one host part
		{"a.b.example.net/x", []string{"glob2"}},
		{"example.org/x", nil},
		{"localhost:5000/x", []string{"port"}},
		{"localhost:5001/x", nil},
		{"localhost/x", []string{"hub"}}, // the kubelet takes a dotless first part for Docker Hub
		{"127.0.0.1:5001/x:latest", []string{"v2"}},
		{"busybox", []string{"hub"}},
		{"library/busybox:1.36", []string{"hub"}},
		{"docker.io/someone/app", []string{"hub"}},
		{"quay.io/coreos/etcd", []string{"coreos", "quay"}},
		{"quay.io/other/x", []string{"quay"}},
		{"other.io/x", nil},
		{"Not A Reference", nil},
	} {
		t.Run(tc.image, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, users(kr.Lookup(tc.image))); diff != "" {
				t.Errorf("Lookup(%q) (-want +got):\n%s", tc.image, diff)
			}
		})
	}
}

func TestNewKeyringSecrets(t *testing.T) {
	a := dockerConfigJSONSecret("a", `{"auths":{"r.test:5000":{"auth":"`+b64("alice:pw-a")+`"}}}`)
	// The auth field overrides username and password; unpadded base64 works.
	b := dockerConfigJSONSecret("b", `{"auths":{"r.test:5000":{"username":"x","password":"y","auth":"`+strings.TrimRight(b64("bob:pw:b"), "=")+`"}}}`)
	legacy := v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "legacy"},
		Type:       v1.SecretTypeDockercfg,
		Data:       map[string][]byte{v1.DockerConfigKey: []byte(`{"https://r.test:5000":{"username":"carol","password":"pw-c","email":"c@x"}}`)},
	}
	opaque := v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "opaque"}, Type: v1.SecretTypeOpaque,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`not read`)}}
	// A dockerconfigjson Secret under the legacy key is not read either.
	wrongKey := v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wrong"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigKey: []byte(`{}`)}}
	kr, err := NewKeyring([]v1.Secret{a, opaque, b, wrongKey, legacy})
	if err != nil {
		t.Fatal(err)
	}
	want := []Credential{
		{Username: "alice", Password: "pw-a", Source: &SecretRef{Namespace: "ns", Name: "a", UID: "uid-a"}},
		{Username: "bob", Password: "pw:b", Source: &SecretRef{Namespace: "ns", Name: "b", UID: "uid-b"}},
		{Username: "carol", Password: "pw-c", Source: &SecretRef{Namespace: "ns", Name: "legacy"}},
	}
	if diff := cmp.Diff(want, kr.Lookup("r.test:5000/app:1")); diff != "" {
		t.Errorf("Lookup (-want +got):\n%s", diff)
	}
	if got := kr.Lookup("r.test:5000/app:1")[0].AuthConfig(); got.Username != "alice" || got.Password != "pw-a" {
		t.Errorf("AuthConfig = %v", got)
	}
	if kr.Len() != 3 {
		t.Errorf("Len = %d, want 3", kr.Len())
	}
}

func TestNewKeyringMalformed(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":       `{"auths":`,
		"bad base64":     `{"auths":{"r.test":{"auth":"!!!"}}}`,
		"no colon":       `{"auths":{"r.test":{"auth":"` + b64("nocolon") + `"}}}`,
		"auths a list":   `{"auths":[]}`,
		"entry a string": `{"auths":{"r.test":"x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			good := dockerConfigJSONSecret("good", `{"auths":{"r.test":{"username":"u","password":"p"}}}`)
			_, err := NewKeyring([]v1.Secret{good, dockerConfigJSONSecret("bad", doc)})
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("NewKeyring error = %v, want a *ConfigError", err)
			}
			if ce.Namespace != "ns" || ce.Name != "bad" || ce.Key != v1.DockerConfigJsonKey {
				t.Errorf("ConfigError = %+v", ce)
			}
			if !strings.HasPrefix(err.Error(), "image pull secret ns/bad: malformed .dockerconfigjson: ") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestHash(t *testing.T) {
	a := Credential{Username: "u", Password: "p", Source: &SecretRef{Name: "a"}}
	b := Credential{Username: "u", Password: "p", Source: &SecretRef{Name: "b"}}
	c := Credential{Username: "u", Password: "q"}
	d := Credential{Username: "u\x00p", Password: ""}
	if a.Hash() != b.Hash() {
		t.Error("the same login from two Secrets hashes differently")
	}
	if a.Hash() == c.Hash() || a.Hash() == d.Hash() {
		t.Error("different logins hash the same")
	}
}

func TestPodSecrets(t *testing.T) {
	get := objects.Funcs{Secret: func(ctx context.Context, ns, name string) (*v1.Secret, error) {
		switch name {
		case "a", "b":
			return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, nil
		case "broken":
			return nil, errors.New("connection refused")
		}
		return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{
		{Name: "b"}, {Name: ""}, {Name: "missing"}, {Name: "a"}, {Name: "broken"},
	}}}
	secrets, failed := PodSecrets(t.Context(), get, pod)
	var names []string
	for _, s := range secrets {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"b", "a"}, names); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"missing", "broken"}, failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
	if _, failed := PodSecrets(t.Context(), nil, pod); len(failed) != 4 {
		t.Errorf("without a getter, failed = %v, want all 4 named", failed)
	}
}

func FuzzNewKeyring(f *testing.F) {
	f.Add([]byte(`{"auths":{"r.test:5000/a":{"auth":"dTpw"}}}`), "r.test:5000/a/b")
	f.Add([]byte(`{"auths":{"*.x.io":{"username":"u"}}}`), "a.x.io/b")
	f.Add([]byte(`{"auths":{"[::1]:5000":{}}}`), "[::1]:5000/x")
	f.Fuzz(func(t *testing.T, doc []byte, image string) {
		s := v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: doc}}
		kr, err := NewKeyring([]v1.Secret{s})
		if err != nil {
			return
		}
		_ = kr.Lookup(image)
	})
}
