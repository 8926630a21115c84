package credentials_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime/credentials"
)

func ExampleNewKeyring() {
	secret := v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "regcred"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{
			"https://registry.example.com": {"username": "ci", "password": "one"},
			"registry.example.com/team":    {"auth": "dGVhbTp0d28="}
		}}`)},
	}
	kr, err := credentials.NewKeyring([]v1.Secret{secret})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range kr.Lookup("registry.example.com/team/app:1.2") {
		fmt.Println(c.Username, c.Source.Name)
	}
	fmt.Println(len(kr.Lookup("other.example.com/app")))
	// Output:
	// team regcred
	// ci regcred
	// 0
}
