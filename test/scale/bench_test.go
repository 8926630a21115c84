package scale

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/kubeclient"
)

const (
	kubeconfigEnv = "NODEKIT_KUBECONFIG"
	shapesEnv     = "NODEKIT_SCALE_SHAPES"
	windowEnv     = "NODEKIT_SCALE_WINDOW"
	kwokLeaseEnv  = "NODEKIT_SCALE_KWOK_LEASE"

	// harnessAgent is the User-Agent of the benchmark's own requests, whose
	// writes (Nodes for kwok, pods) are not the simulators'.
	harnessAgent = "nodekit-scale-harness"
	// kwokAnnotation marks the Nodes kwok manages.
	kwokAnnotation = "kwok.x-k8s.io/node"
	podLabel       = "nodekit-scale"
	// namespace holds both sides' pods, one side after the other.
	namespace = metav1.NamespaceDefault

	// settle is the wait after the last Node is Ready, before the idle
	// window, and after the last pod runs, before the resident set and the
	// writes are read: a status write or Lease renewal due then is done.
	settle = 5 * time.Second
)

type shape struct{ nodes, pods int }

// shapes are the issue's: 50x20, 200x10 and 1000x1, or NODEKIT_SCALE_SHAPES.
func shapes(tb testing.TB) []shape {
	s := os.Getenv(shapesEnv)
	if s == "" {
		return []shape{{50, 20}, {200, 10}, {1000, 1}}
	}
	var out []shape
	for f := range strings.SplitSeq(s, ",") {
		n, p, ok := strings.Cut(strings.TrimSpace(f), "x")
		nn, err1 := strconv.Atoi(n)
		pp, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || nn < 1 || nn > 5000 || pp < 1 || pp > 110 {
			tb.Fatalf("%s=%q: want NODESxPODS[,...], 1-5000 nodes and 1-110 pods a node", shapesEnv, s)
		}
		out = append(out, shape{nn, pp})
	}
	return out
}

// kwokLease is the duration of the Leases kwok holds for its Nodes, in
// seconds: 40, the kubelet's, by default, so that kwok renews them every
// 10 s as the hollow nodes do (the kwok binary holds none unless told;
// kwokctl tells it 200, 40 times its heartbeat factor of 5), or
// NODEKIT_SCALE_KWOK_LEASE.
func kwokLease(tb testing.TB) int {
	s := os.Getenv(kwokLeaseEnv)
	if s == "" {
		return 40
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 10 || n > 3600 {
		tb.Fatalf("%s=%q: want seconds from 10 to 3600", kwokLeaseEnv, s)
	}
	return n
}

func window(tb testing.TB) time.Duration {
	s := os.Getenv(windowEnv)
	if s == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > 10*time.Minute {
		tb.Fatalf("%s=%q: want a duration from 1s to 10m", windowEnv, s)
	}
	return d
}

// BenchmarkHollowVsKWOK compares nodekit's hollow nodes with KWOK v0.8.0 on
// the same real kube-apiserver, one shape at a time (see the package doc),
// b.N not used. For each side (kwok-, nodekit-) and their ratio (x-, the
// hollow nodes' figure over kwok's) it reports:
//
//   - ready-s: from the simulator's start to every Node Ready (for kwok,
//     the benchmark creates the Nodes just after starting it);
//   - cpu-steady-%/node: the process's CPU (user and system, from
//     /proc/PID/stat) over the idle window, per node, in % of one core;
//   - rss-MiB/node: the process's resident set at the end of that window,
//     over the nodes;
//   - idle-writes/node/min: the simulator's writes (Nodes, Leases, ...)
//     over that window, from the audit log;
//   - cpu-burst-ms/pod: the process's CPU from the pods' creation to all
//     running, per pod;
//   - running-s: from the pods' creation to all running;
//   - writes/pod: the simulator's writes (create, update, patch) of pods
//     and their subresources, from the audit log, from the pods' creation
//     to settle after all run, per pod;
//   - rss-pods-MiB/node, rss-KiB/pod: the resident set with the pods
//     running, over the nodes, and its growth over the pods;
//   - rss-added-MiB/node, rss-pods-added-MiB/node: what each node adds to
//     the resident set beyond the first, idle and with its pods: the
//     resident set over that of the same simulator running one idle node
//     (measured first, in a run of its own), over the other nodes. The
//     process's own memory (its binary, runtime, client and watches) is
//     in the first node's figure, and the per-node figures above spread
//     it over the nodes: at 50 nodes it is most of them.
func BenchmarkHollowVsKWOK(b *testing.B) {
	if os.Getenv(kubeconfigEnv) == "" {
		b.Skipf("%s is unset: the benchmark starts an API server of its own with the binaries of hack/apiserver.sh; "+
			"run `hack/apiserver.sh build` (or start) and set %s to say they are there", kubeconfigEnv, kubeconfigEnv)
	}
	kwok := kwokBinary(b)
	hollowBin := buildHollowNodes(b)
	win := window(b)
	kwok.lease = kwokLease(b)
	for _, s := range shapes(b) {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", s.nodes, s.pods), func(b *testing.B) {
			for b.Loop() {
				compare(b, s, win, kwok, hollowBin)
			}
		})
	}
}

type kwokBin struct {
	bin, stages string
	lease       int
}

// kwokBinary returns kwok and its stages as hack/kwok.sh built them, or
// skips.
func kwokBinary(b *testing.B) kwokBin {
	script := hackPath(b, "kwok.sh")
	var k kwokBin
	for _, a := range []struct {
		arg string
		out *string
	}{{"path", &k.bin}, {"stages", &k.stages}} {
		out, err := exec.Command("bash", script, a.arg).Output()
		if err != nil {
			b.Fatalf("hack/kwok.sh %s: %v", a.arg, err)
		}
		*a.out = strings.TrimSpace(string(out))
	}
	for _, p := range []string{k.bin, k.stages} {
		if _, err := os.Stat(p); err != nil {
			b.Skipf("no kwok (%v): run `hack/kwok.sh build` first", err)
		}
	}
	return k
}

// buildHollowNodes builds examples/hollow-nodes, to run as a process of
// its own.
func buildHollowNodes(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "hollow-nodes")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nodekit/nodekit/examples/hollow-nodes")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build examples/hollow-nodes: %v\n%s", err, out)
	}
	return bin
}

func hackPath(tb testing.TB, script string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "hack", script))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// result is one side's figures; the names are the metrics' (see the
// benchmark's doc).
type result struct {
	readyS, cpuSteadyPct, rssMiBNode, idleWritesNodeMin float64
	cpuBurstMsPod, runningS, writesPod                  float64
	rssPodsMiBNode, rssKiBPod                           float64
	rssAddedMiBNode, rssPodsAddedMiBNode                float64
	podWrites, idleWrites                               map[string]int
}

func (r result) metrics() []struct {
	v    float64
	unit string
} {
	return []struct {
		v    float64
		unit string
	}{
		{r.readyS, "ready-s"},
		{r.cpuSteadyPct, "cpu-steady-%/node"},
		{r.rssMiBNode, "rss-MiB/node"},
		{r.idleWritesNodeMin, "idle-writes/node/min"},
		{r.cpuBurstMsPod, "cpu-burst-ms/pod"},
		{r.runningS, "running-s"},
		{r.writesPod, "writes/pod"},
		{r.rssPodsMiBNode, "rss-pods-MiB/node"},
		{r.rssKiBPod, "rss-KiB/pod"},
		{r.rssAddedMiBNode, "rss-added-MiB/node"},
		{r.rssPodsAddedMiBNode, "rss-pods-added-MiB/node"},
	}
}

func compare(b *testing.B, s shape, win time.Duration, kwok kwokBin, hollowBin string) {
	dir := b.TempDir()
	srv := startAPIServer(b, dir)
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{b: b, cfg: cfg, c: client(b, cfg), kubeconfig: srv.kubeconfig(), audit: srv.audit, dir: dir, win: win}

	kwokSide := func(name, prefix string, nodes int) side {
		return side{
			name: name, prefix: prefix, nodes: nodes, pods: s.pods,
			args: []string{kwok.bin, "--kubeconfig=" + srv.kubeconfig(), "--config=" + kwok.stages, "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
				"--node-lease-duration-seconds=" + strconv.Itoa(kwok.lease)},
			createNodes: true,
		}
	}
	hollowSide := func(name, prefix string, nodes int) side {
		return side{
			name: name, prefix: prefix, nodes: nodes, pods: s.pods,
			args: []string{hollowBin, "--kubeconfig=" + srv.kubeconfig(), "--prefix=" + prefix, "--nodes=" + strconv.Itoa(nodes)},
		}
	}
	kw := h.run(kwokSide("kwok", "kwok-node", s.nodes), h.oneNode(kwokSide("kwok-one", "kwok-one-node", 1)))
	nk := h.run(hollowSide("nodekit", "hollow-node", s.nodes), h.oneNode(hollowSide("nodekit-one", "hollow-one-node", 1)))

	km, nm := kw.metrics(), nk.metrics()
	var table strings.Builder
	fmt.Fprintf(&table, "%d nodes x %d pods (kwok's Leases of %d s):\n%-22s %12s %12s %8s\n", s.nodes, s.pods, kwok.lease, "metric", "kwok", "nodekit", "ratio")
	for i := range km {
		ratio := 0.0
		if km[i].v != 0 {
			ratio = nm[i].v / km[i].v
		}
		b.ReportMetric(km[i].v, "kwok-"+km[i].unit)
		b.ReportMetric(nm[i].v, "nodekit-"+nm[i].unit)
		b.ReportMetric(ratio, "x-"+km[i].unit)
		fmt.Fprintf(&table, "%-22s %12.4g %12.4g %8.3g\n", km[i].unit, km[i].v, nm[i].v, ratio)
	}
	fmt.Fprintf(&table, "idle writes: kwok %v, nodekit %v\n", kw.idleWrites, nk.idleWrites)
	fmt.Fprintf(&table, "pod writes: kwok %v, nodekit %v\n", kw.podWrites, nk.podWrites)
	// On standard output, not b.Log: a benchmark's log is cut at 10 lines.
	fmt.Print(table.String())
	b.ReportMetric(0, "ns/op")
}

// apiServer is a kube-apiserver and etcd of the benchmark's own, run by
// hack/apiserver.sh with an audit log of writes.
type apiServer struct {
	dir, audit string
}

func (s apiServer) kubeconfig() string { return filepath.Join(s.dir, "kubeconfig") }

func startAPIServer(b *testing.B, dir string) apiServer {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	s := apiServer{dir: filepath.Join(dir, "apiserver"), audit: filepath.Join(dir, "audit.log")}
	script := hackPath(b, "apiserver.sh")
	run := func(verb string) {
		cmd := exec.Command("bash", script, verb, "--dir", s.dir)
		cmd.Env = append(os.Environ(), "NODEKIT_APISERVER_FLAGS=--audit-policy-file="+policy+" --audit-log-path="+s.audit)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("hack/apiserver.sh %s: %v\n%s", verb, err, out)
		}
	}
	run("start")
	b.Cleanup(func() { run("stop") })
	return s
}

func client(tb testing.TB, cfg *rest.Config) *kubeclient.Clientset {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 2000, 4000
	c.UserAgent = harnessAgent
	c.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubeclient.NewForConfig(c)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

type harness struct {
	b          *testing.B
	cfg        *rest.Config
	c          *kubeclient.Clientset
	kubeconfig string
	audit      string
	dir        string
	win        time.Duration
}

// side is one simulator.
type side struct {
	name, prefix string
	nodes, pods  int
	args         []string
	// createNodes: the benchmark creates the Nodes (kwok's), else the
	// simulator registers them (nodekit's).
	createNodes bool
}

// oneNode runs the simulator with one idle node (sd.nodes is 1) until it
// is Ready and settled, and returns its resident set.
func (h *harness) oneNode(sd side) int64 {
	b := h.b
	p := startProcess(b, filepath.Join(h.dir, sd.name+".log"), sd.args)
	defer h.cleanUp(sd)
	defer p.stop(b)
	if sd.createNodes {
		h.createKWOKNodes(sd)
	}
	h.waitNodesReady(sd, p, 2*time.Minute)
	time.Sleep(settle + h.win)
	return p.rss(b)
}

// run measures the side; oneNode is the resident set of the same
// simulator with one idle node.
func (h *harness) run(sd side, oneNode int64) result {
	b := h.b
	p := startProcess(b, filepath.Join(h.dir, sd.name+".log"), sd.args)
	defer h.cleanUp(sd)
	defer p.stop(b)
	begin := time.Now()
	if sd.createNodes {
		h.createKWOKNodes(sd)
	}
	h.waitNodesReady(sd, p, 2*time.Minute+time.Duration(sd.nodes)*300*time.Millisecond)
	var r result
	r.readyS = time.Since(begin).Seconds()

	time.Sleep(settle)
	cpu0, t0 := p.cpu(b), time.Now()
	time.Sleep(h.win)
	cpu1, t1 := p.cpu(b), time.Now()
	rssIdle := p.rss(b)
	nf := float64(sd.nodes)
	r.cpuSteadyPct = 100 * float64(cpu1-cpu0) / float64(t1.Sub(t0)) / nf
	r.rssMiBNode = float64(rssIdle) / (1 << 20) / nf
	idleWrites, idleBy := h.writes(writeFilter{from: t0, to: t1})
	r.idleWrites = idleBy
	r.idleWritesNodeMin = float64(idleWrites) / nf / t1.Sub(t0).Minutes()

	want := sd.nodes * sd.pods
	cpu2, t2 := p.cpu(b), time.Now()
	h.createPods(sd)
	h.waitPodsRunning(sd, p, want, 2*time.Minute+time.Duration(want)*100*time.Millisecond)
	cpu3, t3 := p.cpu(b), time.Now()
	pf := float64(want)
	r.cpuBurstMsPod = float64(cpu3-cpu2) / 1e6 / pf
	r.runningS = t3.Sub(t2).Seconds()

	time.Sleep(settle)
	rssPods := p.rss(b)
	r.rssPodsMiBNode = float64(rssPods) / (1 << 20) / nf
	r.rssKiBPod = float64(rssPods-rssIdle) / 1024 / pf
	if sd.nodes > 1 {
		others := float64(sd.nodes - 1)
		r.rssAddedMiBNode = float64(rssIdle-oneNode) / (1 << 20) / others
		r.rssPodsAddedMiBNode = float64(rssPods-oneNode) / (1 << 20) / others
	}
	podWrites, by := h.writes(writeFilter{namespace: namespace, resource: "pods", from: t2, to: time.Now()})
	r.writesPod = float64(podWrites) / pf
	r.podWrites = by
	b.Logf("%s: %d nodes Ready in %.1fs, %d pods running in %.1fs", sd.name, sd.nodes, r.readyS, want, r.runningS)
	return r
}

// writes counts the simulator's writes in the audit log: those of any
// User-Agent but the benchmark's and the API server's own.
func (h *harness) writes(f writeFilter) (int, map[string]int) {
	f.excludeAgents = []string{harnessAgent, "kube-apiserver/"}
	n, by, err := countWritesFile(h.audit, f)
	if err != nil {
		h.b.Fatalf("audit log: %v", err)
	}
	return n, by
}

// parallel runs f(0..n-1) on 32 goroutines and fails at the first error.
func parallel(b *testing.B, n int, f func(i int) error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range min(32, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
}

// createKWOKNodes creates the Nodes kwok is to manage, as kwok's docs
// create them: the annotation kwok selects, the labels a kubelet sets, a
// taint-free spec with a pod CIDR of their own (kwok gives pod IPs from
// it; its default pool, 10.0.0.0/24, would run out at 254 pods).
func (h *harness) createKWOKNodes(sd side) {
	ctx := h.b.Context()
	parallel(h.b, sd.nodes, func(i int) error {
		name := fmt.Sprintf("%s-%d", sd.prefix, i)
		n := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{kwokAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
					"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
					"kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "", "type": "kwok"},
			},
			Spec: v1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)},
		}
		_, err := h.c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
}

func (h *harness) createPods(sd side) {
	ctx := h.b.Context()
	parallel(h.b, sd.nodes*sd.pods, func(i int) error {
		node := fmt.Sprintf("%s-%d", sd.prefix, i/sd.pods)
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", node, i%sd.pods), Namespace: namespace, Labels: map[string]string{podLabel: sd.name}},
			Spec: v1.PodSpec{
				NodeName:   node,
				Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		_, err := h.c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

type lister[L any] interface {
	List(context.Context, metav1.ListOptions) (L, error)
}

type watcher interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

type deleter interface {
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// waitNodesReady waits until the side's Nodes are all Ready, or fails
// after timeout or when the simulator exits.
func (h *harness) waitNodesReady(sd side, p *process, timeout time.Duration) {
	nodes := h.c.CoreV1().Nodes()
	h.await(sd, p, "Nodes Ready", sd.nodes, timeout, metav1.ListOptions{},
		func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			list, err := nodes.(lister[*v1.NodeList]).List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			objs := make([]runtime.Object, len(list.Items))
			for i := range list.Items {
				objs[i] = &list.Items[i]
			}
			return objs, list.ResourceVersion, nil
		},
		nodes.(watcher),
		func(o runtime.Object) (string, bool) {
			n, ok := o.(*v1.Node)
			if !ok || !strings.HasPrefix(n.Name, sd.prefix+"-") {
				return "", false
			}
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady {
					return n.Name, c.Status == v1.ConditionTrue
				}
			}
			return n.Name, false
		})
}

// waitPodsRunning waits until want pods of the side run, or fails after
// timeout or when the simulator exits.
func (h *harness) waitPodsRunning(sd side, p *process, want int, timeout time.Duration) {
	pods := h.c.CoreV1().Pods(namespace)
	h.await(sd, p, "pods running", want, timeout, metav1.ListOptions{LabelSelector: podLabel + "=" + sd.name},
		func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			list, err := pods.List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			objs := make([]runtime.Object, len(list.Items))
			for i := range list.Items {
				objs[i] = &list.Items[i]
			}
			return objs, list.ResourceVersion, nil
		},
		pods,
		func(o runtime.Object) (string, bool) {
			p, ok := o.(*v1.Pod)
			if !ok {
				return "", false
			}
			return p.Name, p.Status.Phase == v1.PodRunning
		})
}

// await lists and watches objects (a watch, not polling, so that waiting
// for 1,000 Nodes does not load the API server the simulators share) until
// want of them are good, relisting when a watch ends. It fails after
// timeout, or when the simulator exits.
func (h *harness) await(sd side, p *process, what string, want int, timeout time.Duration, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) ([]runtime.Object, string, error), w watcher,
	good func(runtime.Object) (name string, ok bool)) {
	ctx, cancel := context.WithTimeout(h.b.Context(), timeout)
	defer cancel()
	state := map[string]bool{}
	count := func() int {
		n := 0
		for _, ok := range state {
			if ok {
				n++
			}
		}
		return n
	}
	var lastErr error
	check := func() {
		if !p.alive() {
			h.b.Fatalf("%s exited with %d of %d %s; its log: %s", sd.name, count(), want, what, p.logPath)
		}
		if ctx.Err() != nil {
			h.b.Fatalf("%s: %d of %d %s after %s (last error: %v); its log: %s", sd.name, count(), want, what, timeout, lastErr, p.logPath)
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		check()
		objs, rv, err := list(ctx, opts)
		if err != nil {
			lastErr = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		clear(state)
		for _, o := range objs {
			if name, ok := good(o); name != "" {
				state[name] = ok
			}
		}
		if count() >= want {
			return
		}
		wo := opts
		wo.ResourceVersion = rv
		wo.AllowWatchBookmarks = true
		wi, err := w.Watch(ctx, wo)
		if err != nil {
			lastErr = err
			continue
		}
		for open := true; open; {
			select {
			case ev, ok := <-wi.ResultChan():
				if !ok || ev.Type == watch.Error {
					open = false
					break
				}
				name, ok := good(ev.Object)
				switch {
				case name == "":
				case ev.Type == watch.Deleted:
					delete(state, name)
				case ev.Type == watch.Added || ev.Type == watch.Modified:
					state[name] = ok
				}
				if count() >= want {
					wi.Stop()
					return
				}
			case <-tick.C:
				if !p.alive() || ctx.Err() != nil {
					wi.Stop()
					check()
				}
			}
		}
		wi.Stop()
	}
}

// cleanUp deletes the side's pods (at once), Nodes and Leases, so that the
// next side starts on an API server without them.
func (h *harness) cleanUp(sd side) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	zero := int64(0)
	pods := h.c.CoreV1().Pods(namespace)
	if list, err := pods.(lister[*v1.PodList]).List(ctx, metav1.ListOptions{LabelSelector: podLabel + "=" + sd.name}); err == nil {
		parallel(h.b, len(list.Items), func(i int) error {
			err := pods.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	nodes := h.c.CoreV1().Nodes().(deleter)
	leases := h.c.CoordinationV1().Leases(v1.NamespaceNodeLease).(deleter)
	parallel(h.b, sd.nodes, func(i int) error {
		name := fmt.Sprintf("%s-%d", sd.prefix, i)
		if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// process is a simulator run by the benchmark.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	stopped sync.Once
}

func startProcess(b *testing.B, logPath string, args []string) *process {
	log, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		b.Fatal(err)
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	b.Cleanup(func() { p.stop(b) })
	return p
}

func (p *process) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to 30 s, then kills the process.
func (p *process) stop(b *testing.B) {
	p.stopped.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			b.Logf("%s ignored SIGTERM for 30s: killing it", p.cmd.Path)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

func (p *process) cpu(b *testing.B) time.Duration {
	d, err := procCPU(p.cmd.Process.Pid)
	if err != nil {
		b.Fatalf("%s: %v", p.cmd.Path, err)
	}
	return d
}

func (p *process) rss(b *testing.B) int64 {
	v, err := procRSS(p.cmd.Process.Pid)
	if err != nil {
		b.Fatalf("%s: %v", p.cmd.Path, err)
	}
	return v
}
