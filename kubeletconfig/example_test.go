package kubeletconfig_test

import (
	"flag"
	"fmt"

	"github.com/nodekit/nodekit/kubeletconfig"
)

func ExampleNew() {
	f, err := kubeletconfig.Parse([]byte(`
kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
maxPods: 50
cgroupDriver: systemd
featureGates: {NodeSwap: true}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var fl kubeletconfig.Flags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fl.Register(fs, "/var/lib/nodekit")
	if err := fs.Parse([]string{"--max-pods=60", "--hostname-override=edge-1"}); err != nil {
		fmt.Println(err)
		return
	}
	s, err := kubeletconfig.New(f, &fl)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Options.NodeName, s.Options.Node.MaxPods, s.Options.ResyncInterval)
	fmt.Println("unsupported:", s.Unsupported)
	// Output:
	// edge-1 60 1m0s
	// unsupported: [cgroupDriver featureGates[NodeSwap]]
}
