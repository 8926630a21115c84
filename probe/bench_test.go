//go:build unix

package probe_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	sysruntime "runtime"
	"slices"
	"strconv"
	"strings"
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
// the manager's own share of the figure. "server-apart" runs the server in
// a process of its own (this test binary again) and reports the agent's
// CPU per probe and the server's apart, and their sum. Run it with
//
//	go test -run '^$' -bench ManagerHTTP200 -benchtime 1x ./probe/
//
// BenchmarkLoopbackFloor gives what the connection alone costs on the
// machine.
func BenchmarkManagerHTTP200(b *testing.B) {
	b.Run("aligned", func(b *testing.B) { benchmarkHTTP(b, probe.DefaultAlignment, localServer(b), nil) })
	b.Run("unaligned", func(b *testing.B) { benchmarkHTTP(b, -1, localServer(b), nil) })
	b.Run("noop-prober", func(b *testing.B) {
		srv := localServer(b)
		benchmarkHTTP(b, probe.DefaultAlignment, srv, probe.ProberFunc(func(context.Context, probe.Request) (probe.Result, string, error) {
			srv.hits.Add(1)
			return probe.Success, "", nil
		}))
	})
	b.Run("server-apart", func(b *testing.B) { benchmarkHTTP(b, probe.DefaultAlignment, serverApart(b), nil) })
}

// benchServer is the HTTP server of a benchmark.
type benchServer struct {
	host string
	port int
	// hits counts the probes served (in this process).
	hits atomic.Int64
	// stats, for a server in another process, returns its probes served
	// and its CPU time.
	stats func() (hits int64, cpu time.Duration)
}

func (s *benchServer) served() (int64, time.Duration) {
	if s.stats != nil {
		return s.stats()
	}
	return s.hits.Load(), 0
}

// localServer is an httptest server in this process.
func localServer(b *testing.B) *benchServer {
	s := &benchServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Write([]byte("ok"))
	}))
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	s.host = u.Hostname()
	s.port, _ = strconv.Atoi(u.Port())
	return s
}

// serverEnv makes the test binary the server process of serverApart.
const serverEnv = "NODEKIT_PROBE_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		serveApart()
		return
	}
	os.Exit(m.Run())
}

// serveApart is the server process: it prints its address, answers "ok"
// on /healthz, its probes served and CPU time (ns) on /stats, and exits
// when its standard input closes.
func serveApart() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		user, sys := cpuTime()
		fmt.Fprintf(w, "%d %d", hits.Load(), (user + sys).Nanoseconds())
	})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	_ = http.Serve(ln, mux)
}

// serverApart runs the test server in a process of its own (this test
// binary again), so that the benchmark's process CPU is the agent's share
// alone and the server's is read from it.
func serverApart(b *testing.B) *benchServer {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("server process: %v", err)
	}
	addr, err := net.ResolveTCPAddr("tcp", strings.TrimSpace(line))
	if err != nil {
		b.Fatalf("server process address %q: %v", line, err)
	}
	s := &benchServer{host: addr.IP.String(), port: addr.Port}
	s.stats = func() (int64, time.Duration) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr.String()+"/stats", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Close = true // no idle connection, and its goroutines, left behind
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var hits, ns int64
		if _, err := fmt.Fscan(res.Body, &hits, &ns); err != nil {
			b.Fatal(err)
		}
		return hits, time.Duration(ns)
	}
	return s
}

// benchmarkHTTP runs the workers with the given alignment against srv,
// with prober (nil: the default one).
func benchmarkHTTP(b *testing.B, alignment time.Duration, srv *benchServer, prober probe.Prober) {
	const (
		workers = 200
		warmUp  = time.Second
		measure = 4 * time.Second
	)
	port := srv.port

	started := true
	status := v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: srv.host,
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "web", ContainerID: "bench://c",
			State:   v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
			Started: &started,
		}},
	}
	metrics := &countingMetrics{}
	m, err := probe.NewManager(func(types.UID) (v1.PodStatus, bool) { return status, true }, probe.Options{
		Runtime:   probe.ExecerFunc(nil),
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
	hits0, srvCPU0 := srv.served()
	ok0 := metrics.success.Load()
	var samples []int
	deadline := time.Now().Add(measure)
	for time.Now().Before(deadline) {
		samples = append(samples, sysruntime.NumGoroutine()-before)
		time.Sleep(100 * time.Millisecond)
	}
	user1, sys1 := cpuTime()
	hits1, srvCPU1 := srv.served()
	ok1 := metrics.success.Load()
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
	perProbe := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(execs) }
	cpuPerProbe := perProbe(user + sys)
	if srv.stats != nil {
		// The server ran in a process of its own: this process's CPU is
		// the agent's share.
		serverCPU := perProbe(srvCPU1 - srvCPU0)
		b.ReportMetric(cpuPerProbe, "agent-cpu-µs/probe")
		b.ReportMetric(serverCPU, "server-cpu-µs/probe")
		b.Logf("the server process: %.1f µs/probe", serverCPU)
		cpuPerProbe += serverCPU
	}
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
