package churn_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	sysruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

func TestMain(m *testing.M) {
	// The process runtime starts this binary again as the monitor of each
	// container.
	process.RunMonitor()
	// As root, the run fails when a test leaves a process, mount or
	// cgroup behind.
	leakcheck.VerifyHostTestMain(m)
}

// housekeeping is the agents' housekeeping period (the default).
const housekeeping = 2 * time.Second

// agent is an agent under churn, on one runtime, fed by a channel source.
type agent struct {
	rt      runtime.RuntimeService // unscoped: every object of the runtime
	close   func()
	src     sources.Chan
	rootDir string
	logsDir string
	// mark is an environment variable of every container (process
	// runtime): processes carrying it are the churn's.
	mark     string
	stateDir string
	cancel   context.CancelFunc
	done     chan error
	gen      int
	agent    *nodekit.Agent
}

// newAgent starts an agent on the named runtime, "memory" or "process";
// the test skips when the runtime cannot run here.
func newAgent(tb testing.TB, kind string, log logr.Logger) *agent {
	tb.Helper()
	dir := tb.TempDir()
	a := &agent{
		src:     make(sources.Chan),
		rootDir: filepath.Join(dir, "root"),
		logsDir: filepath.Join(dir, "logs"),
		// The test's whole temporary directory: its base name (001) is
		// the same in every run, and a process left by another run
		// would be counted as this one's.
		mark: "NODEKIT_CHURN=" + dir,
		done: make(chan error, 1),
	}
	switch kind {
	case "memory":
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		a.rt, a.close = rt, rt.Close
	case "process":
		if os.Geteuid() != 0 {
			tb.Skip("the process runtime's churn runs as root (its processes are found through /proc)")
		}
		a.stateDir = filepath.Join(dir, "process")
		rt, err := process.New(process.Options{StateDir: a.stateDir, Logger: log})
		if err != nil {
			tb.Fatal(err)
		}
		a.rt, a.close = rt, func() { _ = rt.Close() }
	default:
		tb.Fatalf("unknown runtime %q", kind)
	}
	opts := nodekit.Options{
		NodeName:           "churn",
		Sources:            []nodekit.NamedSource{{Name: "file", Source: a.src}},
		Runtime:            a.rt,
		RootDir:            a.rootDir,
		Logger:             log,
		HousekeepingPeriod: housekeeping,
	}
	opts.RuntimeManager.PodLogsDir = a.logsDir
	opts.Cgroups.Disabled = true
	// Room for the pods of several generations at once (those still
	// terminating and their replacements): none is refused admission.
	opts.Node.MaxPods = 10000
	ag, err := nodekit.New(opts)
	if err != nil {
		a.close()
		tb.Fatal(err)
	}
	a.agent = ag
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.done <- ag.Run(ctx) }()
	tb.Cleanup(a.stop)
	return a
}

func (a *agent) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	if err := <-a.done; err != nil {
		fmt.Fprintln(os.Stderr, "churn: Agent.Run:", err)
	}
	a.close()
	a.cancel = nil
}

// set sends the agent a new generation of n pods: the same names as the
// last one, new UIDs (as a static pod's file rewritten), so that every
// pod of the last generation is deleted and replaced.
func (a *agent) set(ctx context.Context, n int) error {
	a.gen++
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("churn-%d", i), Namespace: "default",
				UID: types.UID(fmt.Sprintf("churn-%d-%d", a.gen, i)),
			},
			Spec: v1.PodSpec{
				RestartPolicy:                 v1.RestartPolicyAlways,
				TerminationGracePeriodSeconds: ptr(int64(1)),
				Containers: []v1.Container{{
					Name: "c", Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent,
					Command: []string{"sh", "-c", "exec sleep 3600"},
					Env:     []v1.EnvVar{{Name: "NODEKIT_CHURN", Value: strings.TrimPrefix(a.mark, "NODEKIT_CHURN=")}},
				}},
			},
		}
		sources.SetDefaults(p)
		pods[i] = p
	}
	select {
	case a.src <- pods:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// churn replaces the agent's n pods every second for d.
func (a *agent) churn(tb testing.TB, n int, d time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if err := a.set(ctx, n); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// leftovers is what an agent holds of pods that are gone.
type leftovers struct {
	processes, sandboxes, containers, podDirs, logDirs int
}

func (l leftovers) zero() bool { return l == leftovers{} }

// cleared reports whether nothing the bound covers is left:
// processes, sandboxes, containers and pod directories. Pod log
// directories, which the container collector also removes (within a
// minute), are reported and waited for, but not required.
func (l leftovers) cleared() bool {
	l.logDirs = 0
	return l.zero()
}

func (l leftovers) String() string {
	return fmt.Sprintf("%d processes, %d sandboxes, %d containers, %d pod directories, %d pod log directories",
		l.processes, l.sandboxes, l.containers, l.podDirs, l.logDirs)
}

func (a *agent) leftovers(tb testing.TB) leftovers {
	tb.Helper()
	var l leftovers
	ctx := context.Background()
	sbs, err := a.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		tb.Fatalf("ListPodSandbox: %v", err)
	}
	cs, err := a.rt.ListContainers(ctx, nil)
	if err != nil {
		tb.Fatalf("ListContainers: %v", err)
	}
	l.sandboxes, l.containers = len(sbs), len(cs)
	l.podDirs = countEntries(filepath.Join(a.rootDir, "pods"))
	l.logDirs = countEntries(a.logsDir)
	if a.stateDir != "" {
		l.processes = a.processes()
	}
	return l
}

func countEntries(dir string) int {
	es, _ := os.ReadDir(dir)
	return len(es)
}

// processes counts the host processes of the churn: the containers'
// (their environment carries the mark) and their monitors (their command
// line names the state directory).
func (a *agent) processes() int {
	procs, _ := os.ReadDir("/proc")
	n := 0
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
		cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if bytes.Contains(env, []byte(a.mark+"\x00")) || bytes.Contains(cmd, []byte(a.stateDir)) {
			n++
		}
	}
	return n
}

// memory is the test process's memory: live heap (after a collection) and
// resident set.
type memory struct {
	heap, objects uint64
	rss           uint64 // bytes; 0 where /proc cannot tell
	goroutines    int
	threads       int // the process's threads; 0 where /proc cannot tell
}

func readMemory() memory {
	sysruntime.GC()
	var ms sysruntime.MemStats
	sysruntime.ReadMemStats(&ms)
	m := memory{heap: ms.HeapAlloc, objects: ms.HeapObjects, goroutines: sysruntime.NumGoroutine()}
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "VmRSS:":
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				m.rss = kb << 10
			case "Threads:":
				m.threads, _ = strconv.Atoi(f[1])
			}
		}
	}
	return m
}

// settle waits, polling, until the agent holds nothing of the deleted
// pods, its goroutines are back to base and its heap is within 10 % of
// base, or until deadline; it returns what it saw last and when.
func (a *agent) settle(tb testing.TB, base memory, deadline time.Time) (leftovers, memory, time.Time) {
	tb.Helper()
	var m memory
	var read time.Time
	for {
		l := a.leftovers(tb)
		// A collection each time would be most of the process's work.
		if l.cleared() && time.Since(read) >= 250*time.Millisecond {
			m, read = readMemory(), time.Now()
			if l.zero() && m.goroutines <= base.goroutines && float64(m.heap) <= 1.1*float64(base.heap) {
				return l, m, time.Now()
			}
		}
		if time.Now().After(deadline) {
			return l, readMemory(), time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// baseline churns n pods for 3 s and deletes them (so that what the agent
// makes once is made: caches of types and expressions, the Go runtime's
// descriptors of the goroutines of a churn's peak), waits until nothing of
// them is left, and reads the memory: the agent with no pod, before the
// churn. It returns the most goroutines at once during the warm-up too.
func (a *agent) baseline(tb testing.TB, n int) (memory, int) {
	tb.Helper()
	stopPeak := samplePeak()
	a.churn(tb, n, 3*time.Second)
	if err := a.set(context.Background(), 0); err != nil {
		tb.Fatal(err)
	}
	// The warm-up is no measure: it may take longer than settleTimeout
	// (a loaded machine, the large shapes of BenchmarkChurn).
	deadline := time.Now().Add(time.Minute)
	for !a.leftovers(tb).cleared() {
		if time.Now().After(deadline) {
			tb.Fatalf("the warm-up's pods are not gone after a minute: %s", a.leftovers(tb))
		}
		time.Sleep(50 * time.Millisecond)
	}
	peak := stopPeak()
	return readMemory(), peak
}

// samplePeak samples the process's goroutines every 2 ms until the
// returned func is called, which returns the most seen at once (the
// sampler's own goroutine left out). The Go runtime keeps a descriptor of
// every goroutine of the process's peak, some 480 bytes of heap each, for
// as long as the process runs: the live heap after a churn counts those
// of its peak beyond the warm-up's.
func samplePeak() (stop func() int) {
	done := make(chan struct{})
	peak := make(chan int, 1)
	go func() {
		n := 0
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			n = max(n, sysruntime.NumGoroutine()-1)
			select {
			case <-done:
				peak <- n
				return
			case <-tick.C:
			}
		}
	}()
	return func() int { close(done); return <-peak }
}

// settleTimeout bounds the wait for the deleted pods to be gone: their
// grace period (1 s), the pod workers' two waits for a status read after
// they stopped the containers (the kubelet's too: the PLEG's cache is
// refreshed every 2 s on a runtime with events, every relist, 1 s,
// otherwise), and two housekeeping periods.
const settleTimeout = time.Second + 2*2*time.Second + 2*housekeeping

// TestChurn replaces every pod of an agent every second for a few
// seconds, deletes them all, and checks that nothing of them is left once
// they had their grace period and the agent two housekeeping periods (see
// settleTimeout): no process, sandbox, container or pod directory (pod
// log directories are waited for and reported), the goroutines back to
// their count before the churn and the live heap within 10 % of it; and,
// once the agent stopped, no pod object or UID reachable from it
// (podHolders names the part that keeps one). The process runtime runs as
// root only.
func TestChurn(t *testing.T) {
	pods, churn := 50, 5*time.Second
	if testing.Short() {
		pods, churn = 20, 3*time.Second
	}
	for _, rt := range []string{"memory", "process"} {
		t.Run(rt, func(t *testing.T) {
			a := newAgent(t, rt, logr.Discard())
			base, _ := a.baseline(t, pods)
			a.churn(t, pods, churn)
			if err := a.set(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			deleted := time.Now()
			l, m, at := a.settle(t, base, deleted.Add(settleTimeout))
			t.Logf("%s after the deletion: %s; goroutines %d (base %d), heap %d KiB (base %d KiB)",
				at.Sub(deleted).Round(time.Millisecond), l, m.goroutines, base.goroutines, m.heap>>10, base.heap>>10)
			if !l.cleared() {
				t.Errorf("left of the deleted pods: %s", l)
			} else if !l.zero() {
				t.Logf("pod log directories left for the container collector: %d", l.logDirs)
			}
			if m.goroutines > base.goroutines {
				t.Errorf("%d goroutines, %d before the churn", m.goroutines, base.goroutines)
			}
			if float64(m.heap) > 1.1*float64(base.heap) {
				t.Errorf("heap %d KiB, %d KiB before the churn (more than 10 %% over)", m.heap>>10, base.heap>>10)
			}
			// A pod's state goes at the first housekeeping pass after its
			// worker finished (the last ones finish as the runtime's
			// objects go): give the agent two passes before looking.
			time.Sleep(2 * housekeeping)
			a.stop()
			if h := podHolders(a.agent); len(h) > 0 {
				t.Errorf("pods of the churn still reachable from the stopped agent:\n%s", formatHolders(h))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
