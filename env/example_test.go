package env_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/env"
	"github.com/nodekit/nodekit/objects"
)

func ExampleNew() {
	// A standalone agent's own Secrets.
	get := objects.Funcs{Secret: func(_ context.Context, ns, name string) (*v1.Secret, error) {
		return &v1.Secret{Data: map[string][]byte{"password": []byte("s3cret")}}, nil
	}}
	r := env.New(env.Options{Objects: get})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app",
			Env: []v1.EnvVar{
				{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "password"}}},
				{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "DSN", Value: "$(POD):$(PASSWORD)"},
			},
		}}},
	}
	vars, err := r.Container(context.Background(), pod, &pod.Spec.Containers[0], []string{"10.0.0.5"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range vars {
		fmt.Printf("%s=%s\n", v.Name, v.Value)
	}
	// Output:
	// PASSWORD=s3cret
	// POD=web
	// DSN=web:s3cret
}
