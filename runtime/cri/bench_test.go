package cri_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// benchSetup serves a runtime of pods pods (one sandbox and one running
// container each) on a unix socket and returns it with a connection to
// it, the client on that connection and the IDs of the first pod.
func benchSetup(b *testing.B, pods int) (rt *runtimetest.Runtime, conn *grpc.ClientConn, c *cri.Client, sandboxID, containerID string) {
	b.Helper()
	rt = runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	b.Cleanup(rt.Close)
	ctx := b.Context()
	for i := range pods {
		uid := fmt.Sprintf("pod-%04d", i)
		sc := sandboxConfig("pod-"+uid, uid)
		sid, err := rt.RunPodSandbox(ctx, sc, "")
		if err != nil {
			b.Fatal(err)
		}
		cc := containerConfig("app", uid)
		cc.Labels[runtime.LabelPodName] = "pod-" + uid
		cc.Labels[runtime.LabelPodNamespace] = "default"
		id, err := rt.CreateContainer(ctx, sid, cc, sc)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			sandboxID, containerID = sid, id
		}
	}
	endpoint := serve(b, rt)
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cri.MaxMsgSize)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	c, err = cri.NewFromConn(conn)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.CheckVersion(ctx); err != nil {
		b.Fatal(err)
	}
	return rt, conn, c, sandboxID, containerID
}

// BenchmarkCall compares a call through the Client (impl=client) with
// the same call on the generated stub (impl=raw), on the same connection
// to the same in-process server over a unix socket: the Client's overhead
// per call. impl=raw+deadline is the stub call with the Client's per-call
// timeout set by hand, which shows how much of the overhead is the
// deadline itself (gRPC sends it to the server, which arms a timer).
// The runtime holds 110 pods. Compare with benchstat -col /impl.
func BenchmarkCall(b *testing.B) {
	_, conn, c, sid, cid := benchSetup(b, 110)
	raw := runtimeapi.NewRuntimeServiceClient(conn)
	oneSandbox := &runtimeapi.PodSandboxFilter{Id: sid}
	calls := []struct {
		name   string
		client func(context.Context) error
		raw    func(context.Context) error
	}{
		{"Version",
			func(ctx context.Context) error { _, err := c.Version(ctx, "v1"); return err },
			func(ctx context.Context) error {
				_, err := raw.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
				return err
			}},
		{"ContainerStatus",
			func(ctx context.Context) error { _, err := c.ContainerStatus(ctx, cid, false); return err },
			func(ctx context.Context) error {
				_, err := raw.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cid})
				return err
			}},
		{"ListPodSandbox1",
			func(ctx context.Context) error { _, err := c.ListPodSandbox(ctx, oneSandbox); return err },
			func(ctx context.Context) error {
				_, err := raw.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: oneSandbox})
				return err
			}},
		{"ListPodSandbox110",
			func(ctx context.Context) error { _, err := c.ListPodSandbox(ctx, nil); return err },
			func(ctx context.Context) error {
				_, err := raw.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				return err
			}},
	}
	for _, call := range calls {
		impls := []struct {
			name string
			f    func(context.Context) error
		}{
			{"raw", call.raw},
			{"raw+deadline", func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cri.DefaultTimeout)
				defer cancel()
				return call.raw(ctx)
			}},
			{"client", call.client},
		}
		for _, impl := range impls {
			b.Run("method="+call.name+"/impl="+impl.name, func(b *testing.B) {
				ctx := b.Context()
				b.ReportAllocs()
				for b.Loop() {
					if err := impl.f(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// decodedLister hides the Client's runtime.WireLister: a relist through
// it decodes the whole answers, as before the PLEG read them in wire form.
type decodedLister struct{ pleg.Lister }

// BenchmarkRelist measures a pleg.Generic relist that finds nothing
// changed, through the Client to the in-process server, reading the
// answers in wire form ("cri") or decoding them ("cri-decoded"), and on
// the in-memory runtime directly ("inmemory"): the cost of the transport
// and of the decoding for the PLEG's every-second relist at 110 and 1000
// containers. The server runs in the benchmark's process: its CPU counts.
func BenchmarkRelist(b *testing.B) {
	for _, pods := range []int{110, 1000} {
		rt, _, c, _, _ := benchSetup(b, pods)
		for _, impl := range []struct {
			name   string
			lister pleg.Lister
		}{{"cri", c}, {"cri-decoded", decodedLister{c}}, {"inmemory", rt}} {
			b.Run(fmt.Sprintf("containers=%d/%s", pods, impl.name), func(b *testing.B) {
				nop := pleg.StatusGetterFunc(func(_ context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
					return &runtime.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
				})
				g, err := pleg.NewGeneric(impl.lister, nop, pleg.NewCache(), pleg.GenericOptions{ChannelCapacity: 4 * pods})
				if err != nil {
					b.Fatal(err)
				}
				ctx := b.Context()
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
				if n := len(g.Events()); n != 2*pods {
					b.Fatalf("first relist sent %d events, want %d", n, 2*pods)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := g.Relist(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if n := len(g.Events()); n != 2*pods {
					b.Fatalf("relists without changes sent %d events", n-2*pods)
				}
			})
		}
	}
}

// BenchmarkPodStatus measures what a relist pays for each pod that
// changed: podruntime.Manager.GetPodStatus (list the pod's sandboxes and
// containers by label, read each one's status) through the Client, on a
// runtime of 1000 pods.
func BenchmarkPodStatus(b *testing.B) {
	_, _, c, _, _ := benchSetup(b, 1000)
	m, err := podruntime.New(c, c, podruntime.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		st, err := m.GetPodStatus(ctx, "pod-0500", "pod-pod-0500", "default")
		if err != nil || len(st.ContainerStatuses) != 1 || len(st.SandboxStatuses) != 1 {
			b.Fatalf("GetPodStatus = %+v, %v", st, err)
		}
	}
}

// BenchmarkDeathDetection measures how long a container death takes to
// reach a PLEG's Events channel through the Client and the in-process
// server over a unix socket: by the event stream (pleg.Evented) and by
// relisting every second (pleg.Generic). Each iteration starts a
// container, waits a random time within the relist period, kills it, and
// waits for its ContainerDied; latency-ms/death is the mean, max-latency-ms
// the worst. ns/op includes the random wait.
func BenchmarkDeathDetection(b *testing.B) {
	for _, mode := range []string{"evented", "relist"} {
		b.Run(mode, func(b *testing.B) {
			rt, _, c, sid, _ := benchSetup(b, 110)
			mgr, err := podruntime.New(c, c, podruntime.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var gen pleg.EventGenerator
			var ev *pleg.Evented
			if mode == "evented" {
				ev, err = pleg.NewEvented(c, mgr, pleg.NewCache(), pleg.EventedOptions{})
				gen = ev
			} else {
				gen, err = pleg.NewGeneric(c, mgr, pleg.NewCache(), pleg.GenericOptions{})
			}
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- gen.Run(ctx) }()
			defer func() { cancel(); <-done }()
			if ev != nil {
				for !ev.Streaming() {
					time.Sleep(10 * time.Millisecond)
				}
			}
			// Discard the events of the first relist.
			time.Sleep(100 * time.Millisecond)
			for len(gen.Events()) > 0 {
				<-gen.Events()
			}
			sc := sandboxConfig("pod-pod-0000", "pod-0000")
			var total, worst time.Duration
			n := 0
			for b.Loop() {
				cc := containerConfig(fmt.Sprint("d", n), "pod-0000")
				id, err := rt.CreateContainer(ctx, sid, cc, sc)
				if err == nil {
					err = rt.StartContainer(ctx, id)
				}
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(rand.N(time.Second))
				start := time.Now()
				if err := rt.ExitContainer(id, 1, ""); err != nil {
					b.Fatal(err)
				}
				for e := range gen.Events() {
					if e.Type == pleg.ContainerDied && e.Data == id {
						break
					}
				}
				d := time.Since(start)
				total += d
				worst = max(worst, d)
				n++
				// Keep the pod at one container: its status read stays
				// the same size.
				if err := rt.RemoveContainer(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "latency-ms/death")
			b.ReportMetric(float64(worst.Microseconds())/1000, "max-latency-ms")
		})
	}
}
