package objects_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/objects"
)

func ExampleNewCache() {
	reads := 0
	src := objects.Funcs{ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
		reads++
		return &v1.ConfigMap{Data: map[string]string{"mode": "fast"}}, nil
	}}
	c, err := objects.NewCache(src, objects.CacheOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		cm, _ := c.GetConfigMap(context.Background(), "default", "settings")
		fmt.Println(cm.Data["mode"])
	}
	fmt.Println("reads:", reads)
	// Output:
	// fast
	// fast
	// fast
	// reads: 1
}
