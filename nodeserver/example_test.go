package nodeserver_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/nodeserver"
)

func ExampleNew() {
	reg := prometheus.NewRegistry() // the agent's own, served at /metrics
	srv, err := nodeserver.New(nodeserver.Options{
		Port:     10250,
		CertDir:  "/var/lib/nodekit/pki",
		Registry: reg,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := nodekit.Options{NodeServer: srv} // with KubeClient, Runtime, ...
	fmt.Println(opts.NodeServer != nil, srv.Registry() == reg)
	// Output: true true
}
