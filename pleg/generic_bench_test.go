package pleg

import (
	"context"
	"fmt"
	sysruntime "runtime"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// benchRuntime returns a runtime holding pods pods of one sandbox and one
// running container each.
func benchRuntime(b testing.TB, pods int) (*runtimetest.Runtime, []string) {
	b.Helper()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	b.Cleanup(rt.Close)
	ctx := b.Context()
	containers := make([]string, 0, pods)
	for i := range pods {
		uid := fmt.Sprintf("pod-%04d", i)
		sc := podConfig(uid)
		sb, err := rt.RunPodSandbox(ctx, sc, "")
		if err != nil {
			b.Fatal(err)
		}
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
			Labels: map[string]string{
				runtime.LabelPodUID:        uid,
				runtime.LabelPodName:       "pod-" + uid,
				runtime.LabelPodNamespace:  "ns",
				runtime.LabelContainerName: "app",
			},
		}, sc)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
		containers = append(containers, id)
	}
	return rt, containers
}

// BenchmarkRelist measures a relist that finds nothing changed: the cost
// the PLEG pays every second on a busy node.
func BenchmarkRelist(b *testing.B) {
	for _, pods := range []int{110, 1000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			rt, _ := benchRuntime(b, pods)
			g, err := NewGeneric(rt, nopStatus, NewCache(), GenericOptions{ChannelCapacity: 4 * pods})
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			if got := len(drain(g.Events())); got != 2*pods {
				b.Fatalf("first relist sent %d events, want %d", got, 2*pods)
			}
			b.ReportAllocs()
			var before, after sysruntime.MemStats
			sysruntime.ReadMemStats(&before)
			for b.Loop() {
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
			sysruntime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/float64(pods), "allocs/pod")
			if len(g.Events()) != 0 {
				b.Fatal("a relist without changes sent events")
			}
		})
	}
}

// flipLister replays two listings of the same sandboxes in turn: every
// relist sees the changes between them.
type flipLister struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers [2][]*runtimeapi.Container
	n          int
}

func (l *flipLister) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	l.n++
	return l.sandboxes, nil
}

func (l *flipLister) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return l.containers[l.n%2], nil
}

// BenchmarkRelistChurn measures a relist of 1000 pods where ten
// containers changed state since the previous one (died, then started
// again on the next relist): inspection, cache and events included.
func BenchmarkRelistChurn(b *testing.B) {
	const pods, changed = 1000, 10
	rt, _ := benchRuntime(b, pods)
	ctx := b.Context()
	sandboxes, _ := rt.ListPodSandbox(ctx, nil)
	running, _ := rt.ListContainers(ctx, nil)
	for _, c := range running[:changed] {
		if err := rt.ExitContainer(c.Id, 1, ""); err != nil {
			b.Fatal(err)
		}
	}
	someExited, _ := rt.ListContainers(ctx, nil)
	l := &flipLister{sandboxes: sandboxes, containers: [2][]*runtimeapi.Container{running, someExited}}
	g, err := NewGeneric(l, nopStatus, NewCache(), GenericOptions{ChannelCapacity: 4 * pods})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Relist(ctx); err != nil {
		b.Fatal(err)
	}
	drain(g.Events())
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Relist(ctx); err != nil {
			b.Fatal(err)
		}
		if got := len(drain(g.Events())); got != changed {
			b.Fatalf("%d events, want %d", got, changed)
		}
	}
}

// fixedWireLister answers the same list answers in wire form every time.
type fixedWireLister struct {
	Lister
	sandboxes, containers []byte
}

func (l *fixedWireLister) ListPodSandboxWire(context.Context, *runtimeapi.PodSandboxFilter, []byte) ([]byte, error) {
	return l.sandboxes, nil
}

func (l *fixedWireLister) ListContainersWire(context.Context, *runtimeapi.ContainerFilter, []byte) ([]byte, error) {
	return l.containers, nil
}

// BenchmarkRelistWire measures a relist that finds nothing changed, from
// list answers in wire form that need no transport (the runtime's answers
// marshaled once): what a relist adds to the transport of its lists when
// it reads them in wire form (pleg.Generic over runtime/cri), against
// decode=full, the same answers decoded as gRPC's codec does.
func BenchmarkRelistWire(b *testing.B) {
	for _, pods := range []int{110, 1000} {
		rt, _ := benchRuntime(b, pods)
		ctx := b.Context()
		sandboxes, _ := rt.ListPodSandbox(ctx, nil)
		containers, _ := rt.ListContainers(ctx, nil)
		sb, err := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sandboxes})
		if err != nil {
			b.Fatal(err)
		}
		cs, err := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: containers})
		if err != nil {
			b.Fatal(err)
		}
		for _, decode := range []string{"wire", "full"} {
			b.Run(fmt.Sprintf("pods=%d/decode=%s", pods, decode), func(b *testing.B) {
				var l Lister = &fixedWireLister{Lister: rt, sandboxes: sb, containers: cs}
				if decode == "full" {
					l = decodingLister{sb, cs}
				}
				g, err := NewGeneric(l, nopStatus, NewCache(), GenericOptions{ChannelCapacity: 4 * pods})
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
				if got := len(drain(g.Events())); got != 2*pods {
					b.Fatalf("first relist sent %d events, want %d", got, 2*pods)
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(sb) + len(cs)))
				for b.Loop() {
					if err := g.Relist(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if len(g.Events()) != 0 {
					b.Fatal("a relist without changes sent events")
				}
			})
		}
	}
}

// decodingLister decodes the same list answers on every call, as gRPC's
// proto codec decodes a runtime's.
type decodingLister struct{ sandboxes, containers []byte }

func (l decodingLister) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	var r runtimeapi.ListPodSandboxResponse
	err := proto.Unmarshal(l.sandboxes, &r)
	return r.Items, err
}

func (l decodingLister) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var r runtimeapi.ListContainersResponse
	err := proto.Unmarshal(l.containers, &r)
	return r.Containers, err
}
