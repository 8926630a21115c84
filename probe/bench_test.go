//go:build unix

package probe_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	sysruntime "runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/probe"
)

type countingMetrics struct{ success, other atomic.Int64 }

func (c *countingMetrics) ObserveProbe(_ probe.Type, r probe.Result, _ time.Duration) {
	if r == probe.Success {
		c.success.Add(1)
	} else {
		c.other.Add(1)
	}
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkManagerHTTP200 runs 200 HTTP readiness probes, each every
// second, against one local httptest server, in real time: a 1 s warm-up,
// then a 4 s measurement. It reports the process's CPU time (user + system,
// the test server included) per probe execution and the goroutines per
// probe worker (sampled every 100 ms; min and median, as in-flight probes
// and server connections add transient ones), with the default probe
// alignment (50ms) and without (probe times spread as the kubelet's).
// "noop-prober" runs the same workers with a prober that answers at once:
// the manager's own share of the figure. Run it with
//
//	go test -run '^$' -bench ManagerHTTP200 -benchtime 1x ./probe/
//
// BenchmarkLoopbackFloor gives what the connection alone costs on the
// machine.
func BenchmarkManagerHTTP200(b *testing.B) {
	b.Run("aligned", func(b *testing.B) { benchmarkHTTP(b, probe.DefaultAlignment, nil) })
	b.Run("unaligned", func(b *testing.B) { benchmarkHTTP(b, -1, nil) })
	b.Run("noop-prober", func(b *testing.B) {
		benchmarkHTTP(b, probe.DefaultAlignment, func(hit func()) probe.Prober {
			return probe.ProberFunc(func(context.Context, probe.Request) (probe.Result, string, error) {
				hit()
				return probe.Success, "", nil
			})
		})
	})
}

// benchmarkHTTP runs the workers with the given alignment and, when
// newProber is not nil, its prober (which calls hit for each execution)
// instead of the default one.
func benchmarkHTTP(b *testing.B, alignment time.Duration, newProber func(hit func()) probe.Prober) {
	const (
		workers = 200
		warmUp  = time.Second
		measure = 4 * time.Second
	)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	var prober probe.Prober
	if newProber != nil {
		prober = newProber(func() { hits.Add(1) })
	}

	started := true
	status := v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: u.Hostname(),
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "web", ContainerID: "bench://c",
			State:   v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
			Started: &started,
		}},
	}
	metrics := &countingMetrics{}
	m, err := probe.NewManager(probe.Options{
		Runtime:   probe.ExecerFunc(nil),
		Statuses:  func(types.UID) (v1.PodStatus, bool) { return status, true },
		Metrics:   metrics,
		Alignment: alignment,
		Prober:    prober,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	// Drain the readiness channel as the sync loop would.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.Readiness():
			}
		}
	}()
	time.Sleep(10 * time.Millisecond)
	before := sysruntime.NumGoroutine()

	for i := range workers {
		m.AddPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{UID: types.UID("pod-" + strconv.Itoa(i)), Name: "pod-" + strconv.Itoa(i), Namespace: "bench"},
			Spec: v1.PodSpec{Containers: []v1.Container{{
				Name: "web",
				ReadinessProbe: &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port))}},
					PeriodSeconds: 1,
				},
			}}},
		})
	}
	b.ResetTimer()
	time.Sleep(warmUp)

	user0, sys0 := cpuTime()
	hits0, ok0 := hits.Load(), metrics.success.Load()
	var samples []int
	deadline := time.Now().Add(measure)
	for time.Now().Before(deadline) {
		samples = append(samples, sysruntime.NumGoroutine()-before)
		time.Sleep(100 * time.Millisecond)
	}
	user1, sys1 := cpuTime()
	hits1, ok1 := hits.Load(), metrics.success.Load()
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}

	execs := hits1 - hits0
	if execs == 0 {
		b.Fatal("no probe ran")
	}
	slices.Sort(samples)
	perWorkerMin := float64(samples[0]) / workers
	perWorkerMedian := float64(samples[len(samples)/2]) / workers
	user, sys := user1-user0, sys1-sys0
	cpuPerProbe := float64((user + sys).Microseconds()) / float64(execs)
	b.ReportMetric(cpuPerProbe, "cpu-µs/probe")
	b.ReportMetric(float64(execs)/measure.Seconds(), "probes/s")
	b.ReportMetric(perWorkerMin, "goroutines/worker(min)")
	b.ReportMetric(perWorkerMedian, "goroutines/worker(median)")
	b.Logf("%d probe executions (%d successes) in %v: CPU user %v + system %v (%.1f µs/probe); goroutines per worker min %.3f median %.3f max %.3f; failures %d",
		execs, ok1-ok0, measure, user, sys, cpuPerProbe, perWorkerMin, perWorkerMedian,
		float64(samples[len(samples)-1])/workers, metrics.other.Load())
}

// BenchmarkLoopbackFloor measures, in a tight loop, the process CPU of one
// loopback TCP connection through the net package, dialled and closed by
// the client and accepted and closed by a server goroutine: the floor
// under an HTTP probe with the kubelet's semantics (a connection per
// probe), before any byte of HTTP.
func BenchmarkLoopbackFloor(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	d := net.Dialer{KeepAlive: -1}
	user0, sys0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.StopTimer()
	user1, sys1 := cpuTime()
	b.ReportMetric(float64((user1-user0+sys1-sys0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}
