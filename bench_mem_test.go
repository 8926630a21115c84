package nodekit_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// heapProfileEnv, when set, names a directory where BenchmarkMemory's
// agent writes its heap profile with the pods running
// (heap-<pleg>-<pods>.pb.gz, for go tool pprof -sample_index=inuse_space).
const heapProfileEnv = "NODEKIT_BENCH_HEAPPROFILE"

// BenchmarkMemory measures the memory an agent holds for its pods: the
// agent runs alone in a process built from test/benchagent (the agent's
// packages and nothing of the test framework), over a CRI unix socket to
// the in-memory runtime in a third process. It reports, from that
// process's settled memory (see test/benchagent: after a collection, once
// the Go runtime's scavenger returned what it does not keep by itself):
//   - base-rss-MiB, base-anon-MiB and base-heap-MiB: the agent running
//     with no pods (its resident set, the anonymous part of it, without the
//     pages of the binary, and its live heap);
//   - rss-KiB/pod and heap-KiB/pod: the growth of the resident set and of
//     the live heap with the N pods running, per pod;
//   - peak-rss-KiB/pod: the same for the largest resident set over the
//     next seconds, as the idle agent allocates towards its next
//     collection (it depends on what the agent allocates when idle, and
//     on GOGC);
//   - goroutines/pod and stack-KiB/pod: the goroutines (and their stacks)
//     the pods added, per pod;
//   - ms-to-all-running and cpu-ms/pod: the start of the N pods, as in
//     BenchmarkCRI.
//
// The agent's process inherits the environment: GOGC and GOMEMLIMIT,
// which an operator sets for the agent's binary, reach its Go runtime
// (GOGC=50 go test -bench BenchmarkMemory measures the agent collecting
// at half the default heap growth; the CRI server's process gets it too,
// and its memory is not measured). Most of rss-KiB/pod above heap-KiB/pod
// is the heap grown during the start of the pods, which the pods'
// long-lived objects keep fragmented afterwards: GOGC bounds that growth.
// With heapProfileEnv set, the agent also writes its heap profile when
// half the pods run (burst-<pleg>-<pods>.pb.gz); the collection that
// takes during the start changes the figures.
func BenchmarkMemory(b *testing.B) {
	bin := buildBenchAgent(b)
	for _, mode := range []string{"evented", "generic"} {
		for _, n := range []int{110, 1000, 10000} {
			b.Run(fmt.Sprintf("pleg=%s/pods=%d", mode, n), func(b *testing.B) { benchmarkMemory(b, bin, n, mode) })
		}
	}
}

// buildBenchAgent builds test/benchagent into a temporary directory.
func buildBenchAgent(b *testing.B) string {
	b.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("BenchmarkMemory builds its agent and needs the go command: ", err)
	}
	bin := filepath.Join(b.TempDir(), "benchagent")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/nodekit/nodekit/test/benchagent").CombinedOutput()
	if err != nil {
		b.Fatalf("building test/benchagent: %v\n%s", err, out)
	}
	return bin
}

func benchmarkMemory(b *testing.B, bin string, n int, mode string) {
	var base, pods benchAgentMemory
	var ms, cpuNS int64
	for range b.N {
		sock, _ := criServer(b)
		args := []string{"-endpoint", "unix://" + sock, "-pods", strconv.Itoa(n),
			"-root", shmDir(b, "root"), "-logs", shmDir(b, "logs")}
		if mode == "generic" {
			args = append(args, "-generic")
		}
		if dir := os.Getenv(heapProfileEnv); dir != "" {
			args = append(args, "-heapprofile", filepath.Join(dir, fmt.Sprintf("heap-%s-%d.pb.gz", mode, n)),
				"-burstprofile", filepath.Join(dir, fmt.Sprintf("burst-%s-%d.pb.gz", mode, n)))
		}
		cmd := exec.Command(bin, args...)
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
		sc := bufio.NewScanner(stdout)
		lines := 0
		for lines < 3 && sc.Scan() {
			kind, kv := parseBenchAgentLine(b, sc.Text())
			switch kind {
			case "base":
				base.add(kv)
			case "pods":
				pods.add(kv)
			case "running":
				ms += kv["ms"]
				cpuNS += kv["cpu-ns"]
			default:
				b.Fatalf("benchagent: unexpected line %q", sc.Text())
			}
			lines++
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil || lines < 3 {
			b.Fatalf("benchagent: %d of 3 reports, exit: %v", lines, err)
		}
	}
	runs, per := float64(b.N), float64(b.N*n)
	b.ReportMetric(float64(base.rss)/(1<<20)/runs, "base-rss-MiB")
	b.ReportMetric(float64(base.anon)/(1<<20)/runs, "base-anon-MiB")
	b.ReportMetric(float64(base.heap)/(1<<20)/runs, "base-heap-MiB")
	b.ReportMetric(float64(pods.rss-base.rss)/1024/per, "rss-KiB/pod")
	b.ReportMetric(float64(pods.peak-base.peak)/1024/per, "peak-rss-KiB/pod")
	b.ReportMetric(float64(pods.heap-base.heap)/1024/per, "heap-KiB/pod")
	b.ReportMetric(float64(pods.goroutines-base.goroutines)/per, "goroutines/pod")
	b.ReportMetric(float64(pods.stacks-base.stacks)/1024/per, "stack-KiB/pod")
	b.ReportMetric(float64(ms)/runs, "ms-to-all-running")
	b.ReportMetric(float64(cpuNS)/1e6/per, "cpu-ms/pod")
	b.ReportMetric(0, "ns/op")
}

// benchAgentMemory sums the settled memory reports of benchagent.
type benchAgentMemory struct{ rss, anon, peak, heap, stacks, goroutines int64 }

func (m *benchAgentMemory) add(kv map[string]int64) {
	m.rss += kv["rss"]
	m.anon += kv["anon"]
	m.peak += kv["peak"]
	m.heap += kv["heap"]
	m.stacks += kv["stacks"]
	m.goroutines += kv["goroutines"]
}

// parseBenchAgentLine splits "kind k=v k=v" into kind and integer values.
func parseBenchAgentLine(b *testing.B, line string) (string, map[string]int64) {
	f := strings.Fields(line)
	if len(f) == 0 {
		b.Fatalf("benchagent: empty line")
	}
	kv := make(map[string]int64, len(f)-1)
	for _, s := range f[1:] {
		k, v, ok := strings.Cut(s, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			b.Fatalf("benchagent: bad value %q in %q", s, line)
		}
		kv[k] = n
	}
	return f[0], kv
}
