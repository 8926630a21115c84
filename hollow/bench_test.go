package hollow

import (
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// BenchmarkHollowNodes runs hollow nodes against the API server of
// NODEKIT_KUBECONFIG (it skips without one), idle then with pods, and
// reports what they cost the process, once per shape, sharing per process
// (the default) and not (Options.Unshared), b.N not used:
//
//   - rss-MiB/node, heap-MiB/node, goroutines/node: the growth of the
//     resident set, of the live heap and of the goroutines from before the
//     nodes started to the nodes idle and Ready;
//   - idle-cpu-%/node: the process's CPU (user and system) over an idle
//     window of 20s, two status intervals, per node, in % of one core;
//   - stack-MiB/node: the growth of the goroutines' stacks;
//   - rss-KiB/pod, heap-KiB/pod, spans-KiB/pod, stack-KiB/pod,
//     goroutines/pod: the growth once every pod runs, spans-KiB/pod
//     counting the heap's spans in use (the live heap and the free room
//     of its partly used spans);
//   - start-cpu-ms/pod: the CPU from the pods' creation to all running;
//   - s-to-ready, s-to-running: wall time to every Node Ready, to every
//     pod running.
//
// Run it alone: go test -run '^$' -bench 'HollowNodes/nodes=50' -benchtime 1x ./hollow
//
// NODEKIT_HOLLOW_HEAPPROFILE=FILE writes a profile of the live heap (after
// a GC) once every pod runs, the nodes still running, to FILE-<shape>, and
// the heap and goroutines of the idle nodes, before the pods, to
// FILE-<shape>.idle and FILE-<shape>.goroutines (go tool pprof -base
// FILE-<shape>.idle FILE-<shape> shows what the pods hold); with
// -test.memprofilerate=512 the heap profile sees small objects.
// NODEKIT_HOLLOW_CPUPROFILE=FILE writes a CPU profile of the idle window
// to FILE-<shape>; NODEKIT_HOLLOW_STARTPROFILE=FILE one of the pods'
// start, from their creation to all running (the benchmark's own client
// creating them included), to FILE-<shape>.
func BenchmarkHollowNodes(b *testing.B) {
	cfg := restConfig(b)
	for _, shape := range []struct{ nodes, pods int }{{50, 20}, {200, 10}, {1000, 1}} {
		for _, mode := range []string{"shared", "unshared"} {
			b.Run(fmt.Sprintf("nodes=%d/pods=%d/%s", shape.nodes, shape.pods, mode), func(b *testing.B) {
				for b.Loop() {
					benchmarkHollow(b, cfg, shape.nodes, shape.pods, Options{Unshared: mode == "unshared"})
				}
			})
		}
	}
}

type procSample struct {
	// heap is the live heap (HeapAlloc), spans the heap's spans in use
	// (HeapInuse: the live heap and the free room of its partly used
	// spans), stacks the goroutines' stacks (StackInuse).
	rss, heap, spans, stacks int64
	goroutines               int
	cpu                      time.Duration
	at                       time.Time
}

func sample(b *testing.B) procSample {
	debug.FreeOSMemory()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return procSample{
		rss:        vmRSS(b),
		heap:       int64(ms.HeapAlloc),
		spans:      int64(ms.HeapInuse),
		stacks:     int64(ms.StackInuse),
		goroutines: goruntime.NumGoroutine(),
		cpu:        time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		at:         time.Now(),
	}
}

// writeProfile writes the profile name to file.
func writeProfile(b *testing.B, name, file string, debug int) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		b.Fatal(err)
	}
}

// startCPUProfile profiles the process's CPU to file until the returned
// func is called.
func startCPUProfile(b *testing.B, file string) (stop func()) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

func vmRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func benchmarkHollow(b *testing.B, cfg *rest.Config, n, perNode int, opts Options) {
	c := testClient(b, cfg)
	prefix := uniquePrefix("hollow-bench")
	before := sample(b)
	opts.Prefix = prefix
	nodes, err := Start(b.Context(), cfg, n, opts)
	if err != nil {
		b.Fatal(err)
	}
	names := nodes.Names()
	defer cleanUp(b, c, prefix, names)
	defer nodes.Stop()
	ready := time.Since(before.at)
	time.Sleep(5 * time.Second) // the first status passes and Lease renewals settle
	idle := sample(b)
	if f := os.Getenv("NODEKIT_HOLLOW_HEAPPROFILE"); f != "" {
		writeProfile(b, "goroutine", fmt.Sprintf("%s-%dx%d.goroutines", f, n, perNode), 1)
		writeProfile(b, "heap", fmt.Sprintf("%s-%dx%d.idle", f, n, perNode), 0)
	}
	if f := os.Getenv("NODEKIT_HOLLOW_CPUPROFILE"); f != "" {
		stop := startCPUProfile(b, fmt.Sprintf("%s-%dx%d", f, n, perNode))
		time.Sleep(20 * time.Second)
		stop()
	} else {
		time.Sleep(20 * time.Second)
	}
	idleEnd := sample(b)

	stopStart := func() {}
	if f := os.Getenv("NODEKIT_HOLLOW_STARTPROFILE"); f != "" {
		stopStart = startCPUProfile(b, fmt.Sprintf("%s-%dx%d", f, n, perNode))
	}
	want := createPods(b, c, names, perNode, prefix)
	waitRunning(b, c, prefix, want, 5*time.Minute)
	started := sample(b)
	stopStart()
	time.Sleep(3 * time.Second)
	running := sample(b)
	if f := os.Getenv("NODEKIT_HOLLOW_HEAPPROFILE"); f != "" {
		goruntime.GC()
		writeProfile(b, "heap", fmt.Sprintf("%s-%dx%d", f, n, perNode), 0)
	}

	nf, pf := float64(n), float64(want)
	b.ReportMetric(float64(idle.rss-before.rss)/(1<<20)/nf, "rss-MiB/node")
	b.ReportMetric(float64(idle.heap-before.heap)/(1<<20)/nf, "heap-MiB/node")
	b.ReportMetric(float64(idle.stacks-before.stacks)/(1<<20)/nf, "stack-MiB/node")
	b.ReportMetric(float64(idle.goroutines-before.goroutines)/nf, "goroutines/node")
	b.ReportMetric(100*float64(idleEnd.cpu-idle.cpu)/float64(idleEnd.at.Sub(idle.at))/nf, "idle-cpu-%/node")
	b.ReportMetric(float64(running.rss-idleEnd.rss)/1024/pf, "rss-KiB/pod")
	b.ReportMetric(float64(running.heap-idleEnd.heap)/1024/pf, "heap-KiB/pod")
	b.ReportMetric(float64(running.spans-idleEnd.spans)/1024/pf, "spans-KiB/pod")
	b.ReportMetric(float64(running.stacks-idleEnd.stacks)/1024/pf, "stack-KiB/pod")
	b.ReportMetric(float64(running.goroutines-idleEnd.goroutines)/pf, "goroutines/pod")
	b.ReportMetric(float64(started.cpu-idleEnd.cpu)/1e6/pf, "start-cpu-ms/pod")
	b.ReportMetric(ready.Seconds(), "s-to-ready")
	b.ReportMetric(started.at.Sub(idleEnd.at).Seconds(), "s-to-running")
	b.ReportMetric(0, "ns/op")
}
