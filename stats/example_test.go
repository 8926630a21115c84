package stats_test

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/stats"
)

// A summary provider over a CRI runtime, with the host's node figures.
func ExampleNew() {
	var c *cri.Client // cri.New(ctx, "unix:///run/containerd/containerd.sock")
	if c == nil {
		return
	}
	p, err := stats.New(stats.Options{NodeName: "node-1", Runtime: stats.CRIClient(c.RuntimeClient())})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := p.Summary(context.Background(), true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(s.Pods), "pods")
}
