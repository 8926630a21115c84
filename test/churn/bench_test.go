package churn_test

import (
	"context"
	"os"
	"path/filepath"
	sysruntime "runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// The shape of BenchmarkChurn, from the environment.
const (
	// runtimeEnv names the runtime: memory, process (as root) or both
	// (the default, "memory,process" in that order).
	runtimeEnv = "NODEKIT_CHURN_RUNTIME"
	// podsEnv is the number of pods replaced every second (default 100).
	podsEnv = "NODEKIT_CHURN_PODS"
	// durationEnv is how long the churn lasts, a time.Duration (default
	// 10s).
	durationEnv = "NODEKIT_CHURN_DURATION"
	// profileEnv names a directory where BenchmarkChurn writes heap
	// profiles: heap-base.pprof with the baseline, heap-end.pprof at the
	// end (compare them with go tool pprof -base).
	profileEnv = "NODEKIT_CHURN_PROFILES"
)

// BenchmarkChurn churns N pods (replaced every second) for T on each
// runtime asked for, then deletes them all, and reports against the
// agent before the churn (after a 3 s warm-up churn, with no pod):
//   - left4s-*, heap4s-MiB: what is left of the pods two housekeeping
//     periods after the deletion, and the heap then;
//   - left-*, heap9s-MiB, goroutines9s-over-base: what is left of the pods
//     once they had their grace period and the agent two housekeeping
//     periods (settleTimeout, 9 s), and the heap and goroutines then: processes
//     (process runtime), sandboxes, containers, pod directories and pod
//     log directories;
//   - settled-s: how long after the deletion nothing was left and the
//     goroutines and heap were back (up to settleCap; -1 when they were
//     not): an agent that fell behind the churn (on a loaded machine, the
//     process runtime's two process starts per container) works off the
//     pods it owes first, and what it holds of them then is no leak;
//   - goroutines-over-base, heap-base-MiB, heap-MiB, heap-over-base-%,
//     heap-objects-over-base: the goroutines and live heap then;
//   - rss-base-MiB, rss-pods-MiB, rss-MiB: the process's resident set
//     with no pod before the churn, with the N pods running before the
//     churn, and at the end;
//   - threads-base, threads: the process's threads before the churn and at
//     the end (the Go runtime keeps each thread it made, and its memory);
//   - goroutines-peak-base, goroutines-peak: the most goroutines at once
//     during the warm-up, and from the N pods' start to the deletion
//     (sampled every 2 ms): the Go runtime keeps a descriptor of some 480
//     bytes of heap for each goroutine of the peak, so that heap-MiB
//     counts those of a churn's peak beyond the warm-up's (a kubelet's pod
//     workers, a goroutine each, make the same peak);
//   - pod-objects-held: pods of the churn still reachable from the agent
//     once it stopped (see podHolders).
//
// With -v it logs the agent's runtime records, pod directories,
// goroutines and threads every 10 s of the churn.
//
// The agent, the in-memory runtime and the benchmark share one process:
// the heap and resident set are theirs together. Run it once, with the
// issue's shapes for example:
//
//	NODEKIT_CHURN_RUNTIME=process NODEKIT_CHURN_PODS=100 NODEKIT_CHURN_DURATION=90s \
//		go test -run '^$' -bench BenchmarkChurn -benchtime 1x -timeout 30m ./test/churn/
//	NODEKIT_CHURN_RUNTIME=memory NODEKIT_CHURN_PODS=300 NODEKIT_CHURN_DURATION=3m \
//		go test -run '^$' -bench BenchmarkChurn -benchtime 1x -timeout 30m ./test/churn/
func BenchmarkChurn(b *testing.B) {
	pods, churn := 100, 10*time.Second
	if v := os.Getenv(podsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number of pods", podsEnv, v)
		}
		pods = n
	}
	if v := os.Getenv(durationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration", durationEnv, v)
		}
		churn = d
	}
	if os.Getenv(profileEnv) != "" {
		// Every allocation of a few hundred bytes counts: the agent's heap
		// is a few MiB, the default rate samples one per 512 KiB.
		sysruntime.MemProfileRate = 4096
	}
	runtimes := []string{"memory", "process"}
	if v := os.Getenv(runtimeEnv); v != "" && v != "memory,process" {
		runtimes = []string{v}
	}
	for _, rt := range runtimes {
		b.Run("runtime="+rt+"/pods="+strconv.Itoa(pods)+"/churn="+churn.String(), func(b *testing.B) {
			for range b.N {
				benchmarkChurn(b, rt, pods, churn)
			}
		})
	}
}

// settleCap bounds BenchmarkChurn's wait for the deleted pods to be gone.
const settleCap = 5 * time.Minute

func benchmarkChurn(b *testing.B, rt string, pods int, churn time.Duration) {
	a := newAgent(b, rt, logr.Discard())
	base, basePeak := a.baseline(b, pods)
	writeHeapProfile(b, "heap-base.pprof")
	stopPeak := samplePeak()

	// The pods running before the churn.
	if err := a.set(context.Background(), pods); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for a.leftovers(b).containers < pods && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	running := readMemory()

	stopProgress := a.progress(b, 10*time.Second)
	a.churn(b, pods, churn)
	stopProgress() // its goroutine would count
	if err := a.set(context.Background(), 0); err != nil {
		b.Fatal(err)
	}
	peak := stopPeak() // its goroutine would count
	deleted := time.Now()
	left4, m4, _ := a.settle(b, base, deleted.Add(2*housekeeping))
	left, m9, _ := a.settle(b, base, deleted.Add(settleTimeout))
	_, m, at := a.settle(b, base, deleted.Add(settleCap))
	settled := at.Sub(deleted).Seconds()
	if l := a.leftovers(b); !l.zero() || m.goroutines > base.goroutines || float64(m.heap) > 1.1*float64(base.heap) {
		settled = -1
	}
	writeHeapProfile(b, "heap-end.pprof")
	// A pod's state goes at the first housekeeping pass after its worker
	// finished: give the agent two passes before looking (as TestChurn).
	time.Sleep(2 * housekeeping)
	a.stop()
	held := 0
	for _, n := range podHolders(a.agent) {
		held += n
	}

	const mib = 1 << 20
	b.ReportMetric(float64(left4.processes), "left4s-processes")
	b.ReportMetric(float64(left4.sandboxes), "left4s-sandboxes")
	b.ReportMetric(float64(left4.containers), "left4s-containers")
	b.ReportMetric(float64(left4.podDirs), "left4s-pod-dirs")
	b.ReportMetric(float64(m4.heap)/mib, "heap4s-MiB")
	b.ReportMetric(float64(m9.heap)/mib, "heap9s-MiB")
	b.ReportMetric(float64(m9.goroutines-base.goroutines), "goroutines9s-over-base")
	b.ReportMetric(float64(left.processes), "left-processes")
	b.ReportMetric(float64(left.sandboxes), "left-sandboxes")
	b.ReportMetric(float64(left.containers), "left-containers")
	b.ReportMetric(float64(left.podDirs), "left-pod-dirs")
	b.ReportMetric(float64(left.logDirs), "left-log-dirs")
	b.ReportMetric(settled, "settled-s")
	b.ReportMetric(float64(m.goroutines-base.goroutines), "goroutines-over-base")
	b.ReportMetric(float64(base.heap)/mib, "heap-base-MiB")
	b.ReportMetric(float64(m.heap)/mib, "heap-MiB")
	b.ReportMetric(100*(float64(m.heap)/float64(base.heap)-1), "heap-over-base-%")
	b.ReportMetric(float64(m.objects)-float64(base.objects), "heap-objects-over-base")
	b.ReportMetric(float64(base.rss)/mib, "rss-base-MiB")
	b.ReportMetric(float64(running.rss)/mib, "rss-pods-MiB")
	b.ReportMetric(float64(m.rss)/mib, "rss-MiB")
	b.ReportMetric(float64(basePeak), "goroutines-peak-base")
	b.ReportMetric(float64(peak), "goroutines-peak")
	b.ReportMetric(float64(base.threads), "threads-base")
	b.ReportMetric(float64(m.threads), "threads")
	b.ReportMetric(float64(held), "pod-objects-held")
}

// progress logs, every period until the returned func is called, what the
// agent holds: its runtime's records, the pod directories, goroutines and
// threads, to tell an agent keeping up with the churn from one falling
// behind it (go test -v).
func (a *agent) progress(b *testing.B, period time.Duration) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			l := a.leftovers(b)
			m := readMemory()
			b.Logf("%4.0fs: %d sandboxes, %d containers, %d pod directories; %d goroutines, %d threads, heap %.1f MiB",
				time.Since(start).Seconds(), l.sandboxes, l.containers, l.podDirs, m.goroutines, m.threads, float64(m.heap)/(1<<20))
		}
	}()
	return func() { close(done); <-finished }
}

// writeHeapProfile writes the live heap, after a collection, to name in
// the directory profileEnv names, if any.
func writeHeapProfile(b *testing.B, name string) {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return
	}
	sysruntime.GC()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
