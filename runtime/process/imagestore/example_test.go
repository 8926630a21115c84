package imagestore_test

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/runtime/process/imagestore"
)

// A process runtime whose containers run in images imported from
// /var/lib/nodekit/images/import (OCI layouts or image tarballs); as root.
func ExampleNew() {
	store, err := imagestore.New(imagestore.Options{Dir: "/var/lib/nodekit/images"})
	if err != nil {
		panic(err)
	}
	img, err := store.Pull(context.Background(), "busybox:1.36")
	if err != nil {
		fmt.Println(err) // not in the import directory: matches imagestore.ErrNotFound
		return
	}
	fmt.Println(img.ID, img.Rootfs)
	rt, err := process.New(process.Options{Images: store})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
}
