package hostpath_test

import (
	"fmt"

	"github.com/nodekit/nodekit/volume/hostpath"
)

func ExampleNew() {
	hp, err := hostpath.New(hostpath.Options{
		AllowedHostPaths: []hostpath.AllowedHostPath{
			// /srv/data and below, not /srv/database.
			{PathPrefix: "/srv/data"},
			// Only for pods whose containers all mount it read-only.
			{PathPrefix: "/etc/ssl/certs", ReadOnly: true},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Give hp to volume.NewManager in Options.Plugins.
	fmt.Println(hp.Name())
	// Output: kubernetes.io/host-path
}
