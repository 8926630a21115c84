package projected_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/projected"
)

func ExampleNew() {
	get := projected.Funcs{
		TokenFunc: func(ctx context.Context, namespace, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			out := tr.DeepCopy()
			out.Status.Token = "token-for-" + namespace + "/" + sa
			out.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
			return out, nil
		},
	}
	// NoTmpfs: the example runs without root.
	p, err := projected.New(get, projected.Options{NoTmpfs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	vol := v1.Volume{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "vault"}}},
	}}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"},
		Spec:       v1.PodSpec{ServiceAccountName: "builder"},
	}
	m, err := p.SetUp(context.Background(), volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: filepath.Join(root, "token")})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(m.HostPath, "token"))
	fmt.Println(string(b))
	// Output: token-for-default/builder
}

func ExampleNewForClient() {
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"},
		Data:       map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"},
	})
	p, err := projected.NewForClient(clientset.From(client), projected.Options{NoTmpfs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	vol := v1.Volume{Name: "ca", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"}}
	m, err := p.SetUp(context.Background(), volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: filepath.Join(root, "ca")})
	if err != nil {
		fmt.Println(err)
		return
	}
	entries, _ := os.ReadDir(m.HostPath)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") {
			target, _ := os.Readlink(filepath.Join(m.HostPath, e.Name()))
			fmt.Println(e.Name(), "->", target)
		}
	}
	ts, _ := os.Readlink(filepath.Join(m.HostPath, "..data"))
	timestamped := regexp.MustCompile(`^\.\.\d{4}(_\d\d){5}\.\d+$`)
	fmt.Println("..data is a link to a timestamped directory:", timestamped.MatchString(ts))
	// Output:
	// ca.crt -> ..data/ca.crt
	// namespace -> ..data/namespace
	// ..data is a link to a timestamped directory: true
}
