package nodekit_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/syncloop"
)

// criServerEnv, when set in the environment of this test binary, makes it
// serve the in-memory runtime over CRI on the socket it names instead of
// running tests (see TestMain). The CRI benchmarks start it as a separate
// process so that the agent's CPU and memory are measured alone, as they
// would be next to containerd.
const criServerEnv = "NODEKIT_BENCH_CRI_SERVER"

func TestMain(m *testing.M) {
	if sock := os.Getenv(criServerEnv); sock != "" {
		os.Exit(serveCRI(sock))
	}
	if sock := os.Getenv(replayEnv); sock != "" {
		os.Exit(serveReplay(sock, os.Getenv(replayFileEnv)))
	}
	os.Exit(m.Run())
}

// serveCRI serves an in-memory runtime with busybox:1.36 on the unix
// socket sock until its standard input closes (the benchmark ended or
// died). Its standard input takes commands that record the calls it
// serves (see callRecorder).
func serveCRI(sock string) int {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if path := os.Getenv(serverProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	srv := runtimetest.NewServer(rt)
	rec := newCallRecorder()
	go srv.Serve(lis, rec.serverOptions()...)
	serveCommands(rec, os.Stdin, os.Stdout)
	srv.Stop()
	return 0
}

// serverProfileEnv, when set, names a file that receives a CPU profile of
// the in-memory runtime's process, over its whole life: what the runtime
// side of runtime-cpu-ms/pod spends.
const serverProfileEnv = "NODEKIT_BENCH_CRI_CPUPROFILE"

// criProcess starts the fake CRI server process and returns a client
// connected to it. Both stop at the end of the benchmark.
func criProcess(b *testing.B, opts ...cri.Opt) (*cri.Client, *helperProcess) {
	b.Helper()
	proc := startHelper(b, criServerEnv+"="+sockPath(b))
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	c, err := cri.New(ctx, "unix://"+proc.sock, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, proc
}

// criServer starts the fake CRI server process and returns its socket and
// process ID once it serves. It stops at the end of the benchmark.
func criServer(b *testing.B) (string, int) {
	b.Helper()
	proc := startHelper(b, criServerEnv+"="+sockPath(b))
	return proc.sock, proc.pid
}

// helperProcess is this test binary run as a server (the fake CRI server,
// the replay of recorded calls) on a unix socket, until its standard
// input closes.
type helperProcess struct {
	sock string
	pid  int
	in   io.Writer
	out  *bufio.Reader
}

// startHelper starts this test binary with env, one entry of which names
// the socket the helper serves on, and returns once it serves. It stops
// at the end of the benchmark.
func startHelper(b *testing.B, env ...string) *helperProcess {
	b.Helper()
	var sock string
	for _, e := range env {
		if k, v, _ := strings.Cut(e, "="); k == criServerEnv || k == replayEnv {
			sock = v
		}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), "GOMAXPROCS=1")
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
		cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatal("the helper process did not create its socket")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return &helperProcess{sock: sock, pid: cmd.Process.Pid, in: stdin, out: bufio.NewReader(stdout)}
}

// command sends a command line to the helper and waits for its answer.
func (p *helperProcess) command(b *testing.B, line string) {
	b.Helper()
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		b.Fatal(err)
	}
	ans, err := p.out.ReadString('\n')
	if err != nil {
		b.Fatalf("%s: %v", line, err)
	}
	if ans != "ok\n" {
		b.Fatalf("%s: %s", line, ans)
	}
}

// procCPU is the CPU time (user+system) of process pid so far.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
	stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(utime+stime) * (time.Second / clockTicks)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// BenchmarkCRI runs the agent against the in-memory runtime served over a
// CRI unix socket by another process, as it runs next to containerd, and
// reports for N pods:
//   - ms-to-all-running, from handing the pods to the agent until every one
//     has a Running status;
//   - cpu-ms/pod: the agent's CPU (user+system) until then, per pod;
//   - runtime-cpu-ms/pod: the same for the in-memory runtime's process;
//   - heap-KiB/pod: the growth of the live heap with the pods running
//     (the pods given to the agent, which the benchmark holds too,
//     included: about 1.8 KiB a pod);
//   - idle-cpu-%: the agent's CPU over 10 s (NODEKIT_BENCH_IDLE changes
//     it) once its pods run and nothing changes, after 3 s of settling
//     (NODEKIT_BENCH_SETTLE changes it), as a percentage of one core;
//   - settled-cpu-% and idle/settled, with NODEKIT_BENCH_SETTLED set to a
//     duration (60s: the start's tail is over): the agent's CPU over the
//     same window that long after all pods ran, and idle-cpu-% over it,
//     which is 1 when the start's work ends with the start;
//   - relist-floor-%: the CPU this process spends listing every sandbox and
//     container over the socket once a second with the standard client
//     calls (the floor of a relisting PLEG that decodes its lists),
//     measured after the agent stopped, in the same run;
//   - wire-list-floor-%: the same lists once a second, the answers kept
//     in their protobuf encoding (runtime.WireLister), as the relisting
//     PLEG lists: the floor of its relists; list-KiB is the size of the
//     two answers;
//   - pleg-relist-%: the CPU of a relisting PLEG's relists once a second
//     on the same runtime, finding nothing changed, measured after the
//     agent stopped, and pleg-relist/relist-floor, its ratio to
//     relist-floor-%;
//   - unary-floor-us: the CPU of one CRI Version call, the floor of the
//     smallest round trip;
//   - cri-calls/pod and cri-events/pod: the unary CRI calls the agent made
//     from handing it the pods until all ran, and the messages its event
//     streams received, per pod;
//   - call-floor-us/pod: the CPU of those calls alone, per pod: the same
//     requests sent and the same answers received and decoded as the
//     agent did, at the agent's mean concurrency, in the same run (see
//     callRecorder);
//   - max-handler-ms: the longest call of the sync loop's handler until
//     every pod runs (the 10,000 pods' additions come in one call), which
//     bounds an iteration of the loop;
//   - idle/relist-floor: idle-cpu-% over relist-floor-% (at least 1 for a
//     relisting PLEG that decodes its lists; what the agent spends above
//     its relists), idle/wire-list-floor the same over wire-list-floor-%
//     (at least 1 for the relisting PLEG, which reads its lists in wire
//     form), pod-cpu/unary-floor: cpu-ms/pod in Version round trips, and
//     pod-cpu/call-floor: cpu-ms/pod over call-floor-us/pod, what a pod
//     start costs against the floor of its own CRI calls (1 when the agent
//     does nothing but its calls).
//
// The benchmark process also runs the test framework, and reads its
// memory right after a collection, before the Go runtime returned the
// start's garbage: its resident set is not the agent's. BenchmarkMemory
// measures that, with the agent alone in its process.
func BenchmarkCRI(b *testing.B) {
	for _, mode := range []string{"evented", "generic"} {
		for _, n := range []int{110, 1000, 10000} {
			b.Run(fmt.Sprintf("pleg=%s/pods=%d", mode, n), func(b *testing.B) { benchmarkCRI(b, n, mode == "generic") })
		}
	}
}

func benchmarkCRI(b *testing.B, n int, generic bool) {
	pods := benchPods(n)
	var cpu, srvCPU, idleCPU, relistCPU, wireCPU, plegCPU, unaryCPU, callCPU time.Duration
	var unaryCalls, streamMsgs int
	var listBytes int
	var longestCall time.Duration
	var heapGrowth int64
	idle := idleWindow(b)
	settled := envDuration(b, settledEnv, 0)
	var settledCPU time.Duration
	const relists = 10
	const unary = 1000
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var calls clientCalls
		client, proc := criProcess(b, calls.dialOption())
		pid := proc.pid
		recorded := filepath.Join(shmDir(b, "calls"), "calls")
		var timed timedHandler
		var running atomic.Int64
		allRunning := make(chan struct{})
		seen := make(map[string]bool, n)
		src := make(chanSource, 1)
		agent, err := nodekit.New(nodekit.Options{
			NodeName:       "bench",
			Sources:        []nodekit.NamedSource{{Name: "bench", Source: src}},
			Runtime:        client,
			RuntimeManager: podruntime.Options{PodLogsDir: shmDir(b, "logs")},
			RootDir:        shmDir(b, "root"),
			Cgroups:        cgroup.PodManagerOptions{Disabled: true},
			PLEG:           newPLEG(generic),
			Logger:         benchLogger(b),
			WrapHandler: func(h syncloop.SyncHandler) syncloop.SyncHandler {
				timed.SyncHandler = h
				return &timed
			},
			OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
				if s.Phase == v1.PodRunning && !seen[string(pod.UID)] {
					seen[string(pod.UID)] = true
					if running.Add(1) == int64(n) {
						close(allRunning)
					}
				}
			},
			Node: node.Options{MaxPods: n},
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		time.Sleep(200 * time.Millisecond)
		goruntime.GC()
		heap0 := heapBytes()
		ru0 := rusage()
		srv0 := procCPU(b, pid)
		stopStart := cpuProfile(b, startProfileEnv)
		heapProfile(b, startHeapProfileEnv, ".before")
		proc.command(b, "record")
		calls.record()
		b.StartTimer()

		src <- pods
		select {
		case <-allRunning:
		case <-time.After(10 * time.Minute):
			b.Fatalf("%d of %d pods running after 10 minutes", running.Load(), n)
		}

		b.StopTimer()
		stopStart()
		heapProfile(b, startHeapProfileEnv, ".after")
		cpu += rusage() - ru0
		longestCall = max(longestCall, timed.longest())
		b.Logf("longest call of the sync loop's handler until all pods ran: %v", &timed)
		srvCPU += procCPU(b, pid) - srv0
		calls.on.Store(false)
		proc.command(b, "dump "+recorded)
		time.Sleep(settle(b))
		stopProfile := cpuProfile(b, idleProfileEnv)
		i0 := rusage()
		time.Sleep(idle)
		idleCPU += rusage() - i0
		stopProfile()
		if settled > 0 {
			// The same window once the start's tail is over.
			time.Sleep(max(0, settled-settle(b)-idle))
			s0 := rusage()
			time.Sleep(idle)
			settledCPU += rusage() - s0
		}
		goruntime.GC()
		heapGrowth += heapBytes() - heap0
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}

		// The floors, in the same run, over the same socket and pods.
		r0 := rusage()
		for range relists {
			sb, err := client.ListPodSandbox(b.Context(), &runtimeapi.PodSandboxFilter{})
			if err != nil {
				b.Fatal(err)
			}
			cs, err := client.ListContainers(b.Context(), &runtimeapi.ContainerFilter{})
			if err != nil {
				b.Fatal(err)
			}
			if len(sb) < n || len(cs) < n {
				b.Fatalf("relist saw %d sandboxes and %d containers, want %d each", len(sb), len(cs), n)
			}
		}
		relistCPU += rusage() - r0
		// The PLEG's own list calls: the same answers, kept in wire form.
		w0 := rusage()
		for range relists {
			sb, err := client.ListPodSandboxWire(b.Context(), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			cs, err := client.ListContainersWire(b.Context(), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(sb) == 0 || len(cs) == 0 {
				b.Fatal("the wire lists answered nothing")
			}
			listBytes = len(sb) + len(cs)
		}
		wireCPU += rusage() - w0
		// A relist of the PLEG, on the same runtime, finding nothing
		// changed: the lists, and the comparison with the last relist.
		plegCPU += benchRelists(b, client, n, relists)
		u0 := rusage()
		for range unary {
			if _, err := client.Version(b.Context(), ""); err != nil {
				b.Fatal(err)
			}
		}
		unaryCPU += rusage() - u0
		// The start's own CRI calls, replayed with their messages.
		floor := loadCallFloor(b, recorded, &calls)
		u, m := floor.count()
		unaryCalls += u
		streamMsgs += m
		callCPU += floor.replay(b, recorded)
		b.StartTimer()
	}
	b.StopTimer()
	runs := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/runs, "ms-to-all-running")
	b.ReportMetric(float64(cpu.Microseconds())/1000/runs/float64(n), "cpu-ms/pod")
	b.ReportMetric(float64(srvCPU.Microseconds())/1000/runs/float64(n), "runtime-cpu-ms/pod")
	b.ReportMetric(float64(heapGrowth)/1024/runs/float64(n), "heap-KiB/pod")
	b.ReportMetric(float64(longestCall.Microseconds())/1000, "max-handler-ms")
	idlePct := 100 * float64(idleCPU) / float64(idle) / runs
	b.ReportMetric(idlePct, "idle-cpu-%")
	if settled > 0 {
		settledPct := 100 * float64(settledCPU) / float64(idle) / runs
		b.ReportMetric(settledPct, "settled-cpu-%")
		if settledPct > 0 {
			b.ReportMetric(idlePct/settledPct, "idle/settled")
		}
	}
	// relists happen once a second: their CPU over one second per relist.
	relistPct := 100 * float64(relistCPU) / float64(relists*time.Second) / runs
	b.ReportMetric(relistPct, "relist-floor-%")
	wirePct := 100 * float64(wireCPU) / float64(relists*time.Second) / runs
	b.ReportMetric(wirePct, "wire-list-floor-%")
	b.ReportMetric(float64(listBytes)/1024, "list-KiB")
	plegPct := 100 * float64(plegCPU) / float64(relists*time.Second) / runs
	b.ReportMetric(plegPct, "pleg-relist-%")
	if relistPct > 0 {
		b.ReportMetric(plegPct/relistPct, "pleg-relist/relist-floor")
	}
	unaryUs := float64(unaryCPU.Nanoseconds()) / 1000 / unary / runs
	b.ReportMetric(unaryUs, "unary-floor-us")
	// Each figure beside its floor: the idle CPU in relists' worth (a
	// relisting PLEG cannot go below 1 on the lists it makes), a pod
	// start in CRI round trips.
	if relistPct > 0 {
		b.ReportMetric(idlePct/relistPct, "idle/relist-floor")
	}
	if wirePct > 0 {
		b.ReportMetric(idlePct/wirePct, "idle/wire-list-floor")
	}
	if unaryUs > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/runs/float64(n)/unaryUs, "pod-cpu/unary-floor")
	}
	b.ReportMetric(float64(unaryCalls)/runs/float64(n), "cri-calls/pod")
	b.ReportMetric(float64(streamMsgs)/runs/float64(n), "cri-events/pod")
	b.ReportMetric(float64(callCPU.Nanoseconds())/1000/runs/float64(n), "call-floor-us/pod")
	if callCPU > 0 {
		b.ReportMetric(float64(cpu)/float64(callCPU), "pod-cpu/call-floor")
	}
	b.ReportMetric(0, "ns/op")
}

// benchRelists returns the CPU of relists relists of a relisting PLEG on
// the runtime of n running pods that finds nothing changed (the first
// relist, which sees every pod, is not counted).
func benchRelists(b *testing.B, rt runtime.RuntimeService, n, relists int) time.Duration {
	b.Helper()
	status := pleg.StatusGetterFunc(func(_ context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
		return &runtime.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
	})
	g, err := pleg.NewGeneric(rt, status, pleg.NewCache(), pleg.GenericOptions{ChannelCapacity: 4 * n})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Relist(b.Context()); err != nil {
		b.Fatal(err)
	}
	if got := len(g.Events()); got < 2*n {
		b.Fatalf("the first relist sent %d events, want at least %d", got, 2*n)
	}
	first := len(g.Events())
	r0 := rusage()
	for range relists {
		if err := g.Relist(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	d := rusage() - r0
	if len(g.Events()) != first {
		b.Fatal("a relist without changes sent events")
	}
	return d
}

// settleEnv, when set to a duration, replaces the 3 s the CRI benchmark
// lets the agent settle before its idle window: the window then shows the
// steady state rather than the tail of the start (the first log rotation
// pass, the last events of the burst).
const settleEnv = "NODEKIT_BENCH_SETTLE"

func settle(b *testing.B) time.Duration { return envDuration(b, settleEnv, 3*time.Second) }

// settledEnv, when set to a duration, adds a second idle window that
// long after all pods ran (see BenchmarkCRI: settled-cpu-%).
const settledEnv = "NODEKIT_BENCH_SETTLED"

// idleEnv, when set to a duration, replaces the 10 s idle window: 70 s
// takes in the work done every minute (container garbage collection, a
// full housekeeping pass).
const idleEnv = "NODEKIT_BENCH_IDLE"

func idleWindow(b *testing.B) time.Duration { return envDuration(b, idleEnv, 10*time.Second) }

// envDuration reads the positive duration in the environment variable
// env, or def when it is unset.
func envDuration(b *testing.B, env string, def time.Duration) time.Duration {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s: want a positive duration, got %q", env, v)
	}
	return d
}

// idleProfileEnv, when set, names a file that receives a CPU profile of
// the agent's idle window alone (go test's -cpuprofile covers the whole
// benchmark, start-up included).
const idleProfileEnv = "NODEKIT_BENCH_IDLE_CPUPROFILE"

// idleProfile starts the idle window's CPU profile when idleProfileEnv
// is set, and returns the function that stops it.
func idleProfile(b *testing.B) func() { return cpuProfile(b, idleProfileEnv) }

// startProfileEnv, when set, names a file that receives a CPU profile of
// the start alone: from handing the pods to the agent until all run. A
// "%d" in the name is replaced by the start's time in nanoseconds, so
// that several starts (-count, -benchtime) leave a profile each, which
// go tool pprof merges when given them all.
const startProfileEnv = "NODEKIT_BENCH_START_CPUPROFILE"

// startHeapProfileEnv, when set, names the prefix of two heap profiles
// written as the start begins (.before) and once all pods run (.after):
// what the start allocated is the second less the first
// (go tool pprof -sample_index=alloc_space -diff_base=P.before P.after).
// Run with -test.memprofilerate to sample more finely.
const startHeapProfileEnv = "NODEKIT_BENCH_START_HEAPPROFILE"

// heapProfile writes a heap profile to the file named by the environment
// variable env and suffix, when env is set.
func heapProfile(b *testing.B, env, suffix string) {
	prefix := os.Getenv(env)
	if prefix == "" {
		return
	}
	f, err := os.Create(prefix + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// cpuProfile starts a CPU profile into the file named by the environment
// variable env when it is set, and returns the function that stops it.
func cpuProfile(b *testing.B, env string) func() {
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	path = strings.ReplaceAll(path, "%d", strconv.FormatInt(time.Now().UnixNano(), 10))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// logEnv, when set to a verbosity (0 and up), sends the agent's logs of
// that verbosity and below to the benchmark's standard error, with the
// time since the benchmark started: what a long start or a busy idle
// window was doing (relists, stream fall-backs, slow housekeeping).
const logEnv = "NODEKIT_BENCH_LOG"

// benchLogger is the agent's logger: one that discards, unless logEnv is
// set.
func benchLogger(b *testing.B) logr.Logger {
	v := os.Getenv(logEnv)
	if v == "" {
		return logr.Discard()
	}
	level, err := strconv.Atoi(v)
	if err != nil || level < 0 {
		b.Fatalf("%s: want a verbosity, got %q", logEnv, v)
	}
	start := time.Now()
	return funcr.New(func(prefix, args string) {
		fmt.Fprintf(os.Stderr, "%8.3fs %s %s\n", time.Since(start).Seconds(), prefix, args)
	}, funcr.Options{Verbosity: level})
}

// heapBytes is the live heap after the last GC.
func heapBytes() int64 {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// timedHandler is a SyncHandler that keeps the duration of its longest
// call, and which call that was. The sync loop calls it from one
// goroutine.
type timedHandler struct {
	syncloop.SyncHandler
	mu   sync.Mutex
	max  time.Duration
	call string
}

func (h *timedHandler) time(start time.Time, call string, pods int) {
	d := time.Since(start)
	h.mu.Lock()
	defer h.mu.Unlock()
	if d > h.max {
		h.max, h.call = d, fmt.Sprintf("%s of %d pods", call, pods)
	}
}

func (h *timedHandler) longest() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max
}

func (h *timedHandler) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("%s: %v", h.call, h.max.Round(time.Millisecond))
}

func (h *timedHandler) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	defer h.time(time.Now(), "HandlePodAdditions", len(pods))
	h.SyncHandler.HandlePodAdditions(ctx, pods)
}

func (h *timedHandler) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	defer h.time(time.Now(), "HandlePodUpdates", len(pods))
	h.SyncHandler.HandlePodUpdates(ctx, pods)
}

func (h *timedHandler) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	defer h.time(time.Now(), "HandlePodRemoves", len(pods))
	h.SyncHandler.HandlePodRemoves(ctx, pods)
}

func (h *timedHandler) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	defer h.time(time.Now(), "HandlePodReconcile", len(pods))
	h.SyncHandler.HandlePodReconcile(ctx, pods)
}

func (h *timedHandler) HandlePodSyncs(ctx context.Context, pods []*v1.Pod) {
	defer h.time(time.Now(), "HandlePodSyncs", len(pods))
	h.SyncHandler.HandlePodSyncs(ctx, pods)
}

func (h *timedHandler) HandlePodCleanups(ctx context.Context) error {
	defer h.time(time.Now(), "HandlePodCleanups", 0)
	return h.SyncHandler.HandlePodCleanups(ctx)
}
