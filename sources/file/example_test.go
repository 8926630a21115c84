package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/sources/file"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "manifests")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: nginx\n    image: nginx:1.27\n"
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644); err != nil {
		fmt.Println(err)
		return
	}

	src, err := file.New(file.Options{Path: dir, NodeName: "node-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	snapshots := make(chan []*v1.Pod)
	done := make(chan error)
	go func() { done <- src.Run(ctx, snapshots) }()

	pods := <-snapshots
	fmt.Println(len(pods), pods[0].Namespace, pods[0].Name, pods[0].Spec.Containers[0].ImagePullPolicy)
	cancel()
	<-done
	// Output: 1 default web-node-1 IfNotPresent
}
