package admission

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkDefaultChain admits one pod with requests and a host port
// beside 1000 active ones, through the checks the agent runs by default.
func BenchmarkDefaultChain(b *testing.B) {
	n := node()
	sysctls, err := Sysctls(SysctlOptions{KernelVersion: "6.1"})
	if err != nil {
		b.Fatal(err)
	}
	h := Chain(InvalidResources(), sysctls, OS(), PodCount(2000), ResourceFit(n), NodeAffinity(n), NodeName(n), NodePorts(), Taints(n), AppArmor(AppArmorOptions{Enabled: func() bool { return true }}))
	var active []*v1.Pod
	for i := range 1000 {
		active = append(active, pod(fmt.Sprint("p", i), requests(rl("cpu", "1m", "memory", "1Mi")), func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: int32(10000 + i)}}
		}))
	}
	p := pod("new", requests(rl("cpu", "10m", "memory", "10Mi")), func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 9999}}
	})
	b.ReportAllocs()
	for b.Loop() {
		if r := h.Admit(p, active); !r.Admit {
			b.Fatal(r)
		}
	}
}
