package gc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// BenchmarkPlanContainers plans a collection over 1000 dead containers
// (100 pods of 2 containers, 5 dead instances each) and 200 sandboxes.
func BenchmarkPlanContainers(b *testing.B) {
	var l Listing
	for p := range 100 {
		uid := fmt.Sprintf("pod-%03d", p)
		l.Sandboxes = append(l.Sandboxes, sbx("sb-old-"+uid, uid, false, time.Hour), sbx("sb-"+uid, uid, true, time.Minute))
		for c := range 2 {
			name := fmt.Sprintf("c%d", c)
			for i := range 5 {
				l.Containers = append(l.Containers, ctr(fmt.Sprintf("%s-%s-%d", uid, name, i), uid, name, "sb-"+uid, exited, time.Duration(i+1)*time.Minute))
			}
		}
	}
	state := pods{deleted: map[types.UID]bool{"pod-000": true}}
	b.ReportAllocs()
	for b.Loop() {
		plan := PlanContainers(t0, l, state, ContainerPolicy{}, true, false)
		if len(plan.Containers) == 0 {
			b.Fatal("nothing planned")
		}
	}
}

// BenchmarkCollect is a whole collection over the in-memory runtime
// holding 1000 dead containers that the policy keeps (MaxPerPodContainer
// 10): listing and planning, nothing to remove, as in a steady state.
func BenchmarkCollect(b *testing.B) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	ctx := context.Background()
	for p := range 100 {
		uid := fmt.Sprintf("pod-%03d", p)
		sc := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: uid, Namespace: "ns", Uid: uid},
			Labels:   map[string]string{"io.kubernetes.pod.uid": uid},
		}
		sb, err := rt.RunPodSandbox(ctx, sc, "")
		if err != nil {
			b.Fatal(err)
		}
		for i := range 10 {
			id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: uint32(i)},
				Image:    &runtimeapi.ImageSpec{Image: "busybox"},
				Labels:   map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": "app"},
			}, sc)
			if err != nil {
				b.Fatal(err)
			}
			if err := rt.StartContainer(ctx, id); err != nil {
				b.Fatal(err)
			}
			if err := rt.ExitContainer(id, 1, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	c, err := NewContainerCollector(rt, ContainerOptions{
		Pods:       pods{},
		PodLogsDir: "-",
		Policy:     ContainerPolicy{MaxPerPodContainer: 10},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Collect(ctx, false); err != nil {
			b.Fatal(err)
		}
	}
}
