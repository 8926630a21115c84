package secret_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/secret"
)

func ExampleNewForClient() {
	client := fake.NewClientset(&v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds"},
		Data:       map[string][]byte{"password": []byte("s3cret")},
	})
	// NoTmpfs: the example runs without root.
	p, err := secret.NewForClient(clientset.From(client), secret.Options{NoTmpfs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)

	mode := int32(0o400)
	vol := v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: "creds",
		Items:      []v1.KeyToPath{{Key: "password", Path: "db/password", Mode: &mode}},
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"}}
	m, err := p.SetUp(context.Background(), volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: filepath.Join(root, "creds")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fi, _ := os.Stat(filepath.Join(m.HostPath, "db", "password"))
	fmt.Println(fi.Mode())
	// Output: -r--------
}

func ExampleNew() {
	get := secret.GetterFunc(func(ctx context.Context, namespace, name string) (*v1.Secret, error) {
		return &v1.Secret{Data: map[string][]byte{"token": []byte("abc")}}, nil
	})
	p, err := secret.New(get, secret.Options{NoTmpfs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Name())
	// Output: kubernetes.io/secret
}
