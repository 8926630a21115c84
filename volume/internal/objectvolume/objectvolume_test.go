package objectvolume_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/objectvolume"
	pt "github.com/nodekit/nodekit/volume/internal/projectiontest"
)

// labels is a getter of a kind made up for the tests: the labels of a
// pod, read through downwardAPI volumes (whose Items name the pod).
type labels interface {
	Labels(namespace, name string) (map[string]string, error)
}

type labelsFunc func(namespace, name string) (map[string]string, error)

func (f labelsFunc) Labels(namespace, name string) (map[string]string, error) {
	return f(namespace, name)
}

func labelsKind() objectvolume.Kind[labels] {
	return objectvolume.Kind[labels]{
		Name: "example.com/labels", Package: "labels", Source: "labels",
		Volume: func(vol *v1.Volume) (objectvolume.Source, bool) {
			if s := vol.DownwardAPI; s != nil && len(s.Items) == 1 {
				return objectvolume.Source{Name: s.Items[0].Path, DefaultMode: s.DefaultMode}, true
			}
			return objectvolume.Source{}, false
		},
		Keys: func(get labels, name string) func(context.Context, string) (map[string][]byte, bool, error) {
			return func(_ context.Context, ns string) (map[string][]byte, bool, error) {
				l, err := get.Labels(ns, name)
				if err != nil {
					return nil, false, err
				}
				data := map[string][]byte{}
				for k, v := range l {
					data[k] = []byte(v)
				}
				return data, true, nil
			}
		},
	}
}

func labelsVolume(name, pod string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: pod}},
	}}}
}

// TestKind: the plugin follows its kind: its name, the volumes it
// supports and refreshes, where it reads the keys, its errors.
func TestKind(t *testing.T) {
	get := labelsFunc(func(ns, name string) (map[string]string, error) {
		if name != "web" {
			return nil, errors.New("no such pod")
		}
		return map[string]string{"app": "web", "ns": ns}, nil
	})
	p, err := objectvolume.New[labels](get, labelsKind(), objectvolume.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "example.com/labels" {
		t.Errorf("Name = %q", p.Name())
	}
	vol, other := labelsVolume("l", "web"), v1.Volume{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	if !p.CanSupport(&vol) || !p.RequiresRefresh(&vol) || p.CanSupport(&other) || p.RequiresRefresh(&other) {
		t.Error("CanSupport and RequiresRefresh do not follow Kind.Volume")
	}

	req := pt.Request(t, p.Name(), pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "web 0644", "ns": "default 0644"}
	if diff := cmp.Diff(want, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if err := p.TearDown(t.Context(), pt.TearDownRequest(req)); err != nil {
		t.Fatal(err)
	}

	missing := labelsVolume("m", "db")
	_, err = p.SetUp(t.Context(), pt.Request(t, p.Name(), pt.Pod("web", missing), &missing))
	if want := "labels: volume m: getting labels default/db: no such pod"; err == nil || err.Error() != want {
		t.Errorf("SetUp of a missing object: %v, want %s", err, want)
	}
	_, err = p.SetUp(t.Context(), pt.Request(t, p.Name(), pt.Pod("web", other), &other))
	if want := "labels: volume e: not a labels volume"; !errors.Is(err, volume.ErrInvalid) || err.Error() != want {
		t.Errorf("SetUp of another kind's volume: %v, want %s (ErrInvalid)", err, want)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"nil getter", func() error {
			_, err := objectvolume.New[labels](nil, labelsKind(), objectvolume.Options{})
			return err
		}, "labels: the Getter is nil"},
		{"nil client", func() error {
			_, err := objectvolume.NewForClient(nil, labelsKind(), objectvolume.Options{})
			return err
		}, "labels: the client is nil"},
		{"a client that cannot get the kind's objects", func() error {
			_, err := objectvolume.NewForClient(clientset.From(fake.NewClientset()), labelsKind(), objectvolume.Options{})
			return err
		}, "labels: the client cannot get a labels"},
	} {
		if err := tc.new(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}
