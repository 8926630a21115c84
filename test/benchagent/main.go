// Command benchagent is the agent process of the root package's memory
// benchmark (BenchmarkMemory): an agent alone in its process, as a user's
// binary would hold it, over a CRI socket served by another process. The
// benchmark builds and starts it; it is not meant to be run by hand.
//
// It starts the agent with no pods and reports its settled memory (the
// base), hands it -pods generated pods (one busybox container each), waits
// until all of them run and the agent is calm (under a tenth of a core
// for two seconds), and reports its settled memory again. Each report
// is one line on standard output:
//
//	base rss=<bytes> anon=<bytes> peak=<bytes> heap=<bytes> goroutines=<n> stacks=<bytes> init=<bytes> initanon=<bytes>
//	running ms=<ms> cpu-ns=<ns>
//	pods rss=<bytes> anon=<bytes> peak=<bytes> heap=<bytes> goroutines=<n> stacks=<bytes>
//
// Settled memory is what a long-running agent holds once its work is
// done: rss is the resident set after a garbage collection (which the Go
// runtime forces at least every two minutes) once the runtime's
// background scavenger has returned the freed memory it does not keep, as
// it does by itself, without debug.FreeOSMemory (the smallest of three
// such collections a second apart, so that a periodic pass of the agent
// under way at one of them does not count); anon is its anonymous
// part (the rest are the pages of the binary the agent touched). peak is
// the largest resident set over the following window, while the idle
// agent goes on allocating towards its next collection. heap is the live
// heap of the collection. init and initanon, on the base line only, are
// the resident set and its anonymous part when main starts, before the
// agent exists: what the Go runtime and the initialization of every
// package the binary imports hold (most of the base; see -v for the
// binary's mappings).
//
// It takes GOGC and GOMEMLIMIT from its environment, as any Go binary.
// It exits when its standard input closes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	sysruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/sources"
)

func main() {
	// Before anything else: the resident set of the runtime and of the
	// imported packages' initialization.
	initRSS, initAnon := rss()
	endpoint := flag.String("endpoint", "", "CRI endpoint of the runtime")
	n := flag.Int("pods", 1000, "pods to run")
	generic := flag.Bool("generic", false, "relist every second instead of following the runtime's events")
	root := flag.String("root", "", "the agent's root directory")
	logs := flag.String("logs", "", "the pods' log directory")
	window := flag.Duration("window", 5*time.Second, "how long settled memory is watched")
	heapProfile := flag.String("heapprofile", "", "write the heap profile with the pods running to this file")
	burstProfile := flag.String("burstprofile", "", "write the heap profile during the start, when -burstat of the pods run, to this file")
	burstAt := flag.Float64("burstat", 0.5, "the share of the pods running when -burstprofile is written")
	profileRate := flag.Int("memprofilerate", 0, "runtime.MemProfileRate for -heapprofile (default: the Go runtime's)")
	statusReads := flag.Int("statusreads", 0, "podruntime.Options.MaxParallelStatusReads (default: no limit)")
	verbose := flag.Bool("v", false, "write the Go runtime's memory classes to standard error at each report")
	flag.Parse()
	if *profileRate > 0 {
		sysruntime.MemProfileRate = *profileRate
	}
	if err := run(*endpoint, *n, *generic, *root, *logs, *window, *heapProfile, *burstProfile, int(*burstAt*float64(*n)), *statusReads, *verbose, memory{rss: initRSS, anon: initAnon}); err != nil {
		fmt.Fprintln(os.Stderr, "benchagent:", err)
		os.Exit(1)
	}
}

func run(endpoint string, n int, generic bool, root, logs string, window time.Duration, heapProfile, burstProfile string, burstAt, statusReads int, verbose bool, init memory) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the benchmark ended or died
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	client, err := cri.New(ctx, endpoint)
	if err != nil {
		return err
	}
	defer client.Close()
	var running atomic.Int64
	allRunning := make(chan struct{})
	seen := make(map[types.UID]bool, n)
	src := make(sources.Chan, 1)
	opts := nodekit.Options{
		NodeName:       "bench",
		Sources:        []nodekit.NamedSource{{Name: "bench", Source: src}},
		Runtime:        client,
		RuntimeManager: podruntime.Options{PodLogsDir: logs, MaxParallelStatusReads: statusReads},
		RootDir:        root,
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		OnPodStatus: func(pod *v1.Pod, s v1.PodStatus) {
			// Called serially; seen is only touched here.
			if s.Phase == v1.PodRunning && !seen[pod.UID] {
				seen[pod.UID] = true
				switch running.Add(1) {
				case int64(n):
					close(allRunning)
				case int64(burstAt):
					if burstProfile != "" {
						// Off the status callback, which the agent
						// calls serially. Its collection
						// changes the start's heap: measure without it.
						go func() {
							if err := writeHeapProfile(burstProfile); err != nil {
								fmt.Fprintln(os.Stderr, "benchagent: burst profile:", err)
							}
						}()
					}
				}
			}
		},
		Node: node.Options{MaxPods: n},
	}
	if generic {
		opts.PLEG = func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
			return pleg.NewGeneric(rt, st, c, pleg.GenericOptions{Logger: log})
		}
	}
	agent, err := nodekit.New(opts)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	stop := func() error {
		cancel()
		return <-done
	}
	// Let the agent start (first relist, sources) before the base.
	if !sleep(ctx, time.Second) {
		return stop()
	}
	base := settle(window)
	base.init = &init
	report("base", base, verbose)

	cpu0 := cpuTime()
	start := time.Now()
	src <- pods(n)
	select {
	case <-allRunning:
	case <-ctx.Done():
		return stop()
	case err := <-done:
		if err == nil {
			err = errors.New("the agent stopped")
		}
		return err
	}
	fmt.Printf("running ms=%d cpu-ns=%d\n", time.Since(start).Milliseconds(), int64(cpuTime()-cpu0))
	// The start's work goes on after the last pod runs (the PLEG's events,
	// the statuses): wait until the agent used less than a tenth of a core
	// over two seconds in a row (or for a minute).
	for calm, t0 := 0, time.Now(); calm < 2 && time.Since(t0) < time.Minute; {
		c0 := cpuTime()
		if !sleep(ctx, time.Second) {
			return stop()
		}
		if cpuTime()-c0 < 100*time.Millisecond {
			calm++
		} else {
			calm = 0
		}
	}
	report("pods", settle(window), verbose)
	if heapProfile != "" {
		if err := writeHeapProfile(heapProfile); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return stop()
}

// memory is one settled measure.
type memory struct {
	rss, anon, peak, heap, stacks int64
	goroutines                    int
	// init, on the base, is the resident set (rss and anon) when main
	// started.
	init *memory
}

// report writes a memory report line, and with verbose the Go runtime's
// memory classes and the process's memory map totals to standard error.
func report(what string, m memory, verbose bool) {
	line := fmt.Sprintf("%s rss=%d anon=%d peak=%d heap=%d goroutines=%d stacks=%d", what, m.rss, m.anon, m.peak, m.heap, m.goroutines, m.stacks)
	if m.init != nil {
		line += fmt.Sprintf(" init=%d initanon=%d", m.init.rss, m.init.anon)
	}
	fmt.Println(line)
	if !verbose {
		return
	}
	binaryMappings(what)
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/heap/goal") {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		fmt.Fprintf(os.Stderr, "%s %s %d KiB\n", what, s.Name, s.Value.Uint64()>>10)
	}
	if data, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
		fmt.Fprintf(os.Stderr, "%s smaps_rollup:\n%s", what, data)
	}
}

// binaryMappings writes to standard error the resident part of each
// mapping of the process's own binary (from /proc/self/smaps): the code
// (r-xp: .text), the read-only data (r--p: .rodata, .gopclntab, the type
// and itab links) and the data (rw-p: .data, .noptrdata, .bss), each a
// range of file offsets. A page of a file in the page cache is resident
// as soon as it is mapped: the kernel maps the pages around each fault
// (fault-around, 64 KiB), and a whole large folio where the page cache
// holds one (a freshly written file), whether or not they are read.
func binaryMappings(what string) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	var header string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && !strings.HasSuffix(f[0], ":"): // a mapping's first line
			header = ""
			if len(f) >= 6 && f[5] == exe {
				header = f[1] + " offset 0x" + f[2]
			}
		case header != "" && len(f) >= 2 && f[0] == "Rss:":
			fmt.Fprintf(os.Stderr, "%s binary %s: %s KiB resident\n", what, header, f[1])
		}
	}
}

// settle returns the agent's memory at rest and its peak: it collects
// garbage and waits for the scavenger three times, a second apart, and
// keeps the smallest resident set (a periodic pass of the agent, such as
// the container collector listing every container, may be under way at
// one collection), then watches the resident set over window for the
// peak.
func settle(window time.Duration) memory {
	var m memory
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		if c := collect(); i == 0 || c.rss < m.rss {
			m = c
		}
	}
	m.peak = m.rss
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		r, _ := rss()
		m.peak = max(m.peak, r)
	}
	return m
}

// collect collects garbage, waits until the runtime's scavenger stops
// returning memory to the system, and returns the live heap and the
// resident set then.
func collect() memory {
	start := time.Now()
	sysruntime.GC()
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(samples)
	m := memory{heap: int64(samples[0].Value.Uint64()), stacks: int64(samples[1].Value.Uint64()), goroutines: sysruntime.NumGoroutine()}
	// The scavenger is done when the resident set shrank by less than
	// 256 KiB over two half-seconds in a row (or after 30s).
	m.rss, m.anon = rss()
	for still := 0; still < 2 && time.Since(start) < 30*time.Second; {
		time.Sleep(500 * time.Millisecond)
		cur, anon := rss()
		if m.rss-cur < 256<<10 {
			still++
		} else {
			still = 0
		}
		if cur < m.rss {
			m.rss, m.anon = cur, anon
		}
	}
	return m
}

// rss is the process's resident set size (VmRSS) and its anonymous part
// (RssAnon).
func rss() (total, anon int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
		switch string(f[0]) {
		case "VmRSS:":
			total = kb << 10
		case "RssAnon:":
			anon = kb << 10
		}
	}
	return total, anon
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	sysruntime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// pods returns n static pods of one busybox container each, as the root
// package's benchmarks run.
func pods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: v1.PodSpec{Containers: []v1.Container{{
				Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"},
			}}},
		}
		sources.SetDefaults(p)
		pods[i] = p
	}
	return pods
}
