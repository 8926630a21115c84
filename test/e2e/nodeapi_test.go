package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// kubectlPath builds kubectl 1.37 with hack/kubectl.sh (cached; cold about
// 2 minutes after kube-apiserver's build) and returns its path.
func kubectlPath(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../../hack/kubectl.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), script, "build").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		skipOrFail(t, "building kubectl with %s: %v\n%s", script, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// kubectlRunner runs kubectl against the test's API server.
type kubectlRunner struct {
	t          *testing.T
	bin        string
	kubeconfig string
	ns         string
}

func (k kubectlRunner) command(ctx context.Context, args ...string) *exec.Cmd {
	args = append([]string{"--kubeconfig", k.kubeconfig, "--namespace", k.ns, "--request-timeout=0"}, args...)
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	return cmd
}

// run runs kubectl with stdin and returns its stdout, stderr and exit
// code; it fails the test when kubectl cannot be run at all.
func (k kubectlRunner) run(stdin string, args ...string) (string, string, int) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(k.t.Context(), 60*time.Second)
	defer cancel()
	cmd := k.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		k.t.Fatalf("kubectl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// ok runs kubectl and fails the test unless it exits 0.
func (k kubectlRunner) ok(args ...string) string {
	k.t.Helper()
	out, stderr, code := k.run("", args...)
	if code != 0 {
		k.t.Fatalf("kubectl %v: exit %d: %s", args, code, stderr)
	}
	return out
}

// lines starts kubectl and sends each line it prints to the returned
// channel until stop is called (which waits for kubectl to exit).
func (k kubectlRunner) lines(args ...string) (<-chan string, func()) {
	k.t.Helper()
	_, ch, stop := k.start(false, args...)
	return ch, stop
}

// interactive is lines with kubectl's standard input kept open: what the
// test writes to the returned writer reaches kubectl as typed.
func (k kubectlRunner) interactive(args ...string) (io.WriteCloser, <-chan string, func()) {
	k.t.Helper()
	return k.start(true, args...)
}

func (k kubectlRunner) start(withStdin bool, args ...string) (io.WriteCloser, <-chan string, func()) {
	k.t.Helper()
	ctx, cancel := context.WithCancel(k.t.Context())
	cmd := k.command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	var in io.WriteCloser
	if withStdin {
		if in, err = cmd.StdinPipe(); err != nil {
			k.t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	ch := make(chan string, 1024)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case ch <- s.Text():
			default: // the test stopped reading
			}
		}
	}()
	var once sync.Once
	return in, ch, func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			cmd.Wait()
		})
	}
}

// lineWatch is an io.Writer that closes seen once what was written
// matches re.
type lineWatch struct {
	re   *regexp.Regexp
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.re.Match(w.buf.Bytes()) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// oneSize is a terminal that reports its size once and never changes
// until ctx ends.
type oneSize struct {
	ctx  context.Context
	size remotecommand.TerminalSize
	sent bool
}

func (o *oneSize) Next() *remotecommand.TerminalSize {
	if !o.sent {
		o.sent = true
		return &o.size
	}
	<-o.ctx.Done()
	return nil
}

// waitLine reads lines until one matches re, or fails the test after 60 s.
func waitLine(t *testing.T, ch <-chan string, re *regexp.Regexp) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("kubectl ended before printing a line matching %s", re)
			}
			if re.MatchString(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line matching %s within 60 s", re)
		}
	}
}

// TestNodeAPIKubectl joins an agent serving the node API to the API
// server (started with kubelet client certificates) on containerd, and
// drives it with kubectl 1.37: logs (current, previous, tail, timestamps,
// follow), exec with stdin and exit code, attach, debug, port-forward; the
// metrics and stats through the API server's node proxy, parsed with the
// Prometheus text parser and the kubelet's stats types; and 401/403
// straight to the agent's port. debug runs an ephemeral container in the
// PID namespace of the pod's container, then one whose stdin is typed into
// through the node API's attach.
func TestNodeAPIKubectl(t *testing.T) {
	c := newCluster(t, false)
	kubectl := kubectlRunner{t: t, bin: kubectlPath(t), kubeconfig: c.kubeconfig, ns: c.ns}
	if _, err := os.Stat(filepath.Join(filepath.Dir(c.kubeconfig), "pki", "kubelet-client.crt")); err != nil {
		t.Fatalf("the API server has no kubelet client certificate (an instance from an older hack/apiserver.sh?): %v", err)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv, err := nodeserver.New(nodeserver.Options{Listener: ln, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	c.agentWith(nil, "node api", func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
		// The client CA is the one the API server publishes, as for
		// minimal-agent --kubeconfig.
		o.NodeServer = srv
	})

	// talker exits 3 on its first run and then prints a tick a second;
	// an emptyDir counts the runs.
	talker := c.apiPod("talker", v1.Container{
		Name:         "main",
		Command:      []string{"sh", "-c", `n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; echo run $n; echo err $n >&2; if [ $n -eq 1 ]; then exit 3; fi; i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done`},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c.createPod(talker)
	web := c.apiPod("web", v1.Container{Name: "web", Ports: []v1.ContainerPort{{ContainerPort: 8080}}})
	web.Spec.Containers[0].Image = webImage
	c.createPod(web)
	// typist reads a line from its terminal and answers it.
	typist := c.apiPod("typist", v1.Container{
		Name: "tty", Stdin: true, TTY: true,
		Command: []string{"sh", "-c", "while read x; do echo got $x; done; sleep 3600"},
	})
	c.createPod(typist)

	eventuallyNil(t, 90*time.Second, "the Node advertising the API's port", func() error {
		n, err := c.api.CoreV1().Nodes().Get(t.Context(), c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(port) {
			return fmt.Errorf("kubeletEndpoint.Port %d, want %d", got, port)
		}
		return nil
	})
	eventuallyNil(t, 90*time.Second, "talker restarted once and running, web and typist running", func() error {
		p, err := c.getPod(t.Context(), "talker")
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount < 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("talker: %+v", p.Status.ContainerStatuses)
		}
		for _, name := range []string{"web", "typist"} {
			p, err := c.getPod(t.Context(), name)
			if err != nil {
				return err
			}
			if err := checkRunning(p.Status, true); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})

	t.Run("logs", func(t *testing.T) {
		var out string
		// stdout and stderr reach the log file through separate pipes:
		// their interleaving varies, hence tick 3 (past err 2) first.
		eventuallyNil(t, 30*time.Second, "three ticks in the log", func() error {
			out = kubectl.ok("logs", "talker")
			if !strings.Contains(out, "tick 3\n") {
				return fmt.Errorf("logs: %q", out)
			}
			return nil
		})
		head := strings.Split(out, "\n")[:3]
		sort.Strings(head)
		if strings.Join(head, ",") != "err 2,run 2,tick 1" {
			t.Errorf("logs start %q, want both streams of run 2 and tick 1", out)
		}
		prev := strings.Split(strings.TrimSpace(kubectl.ok("logs", "talker", "--previous")), "\n")
		sort.Strings(prev)
		if strings.Join(prev, ",") != "err 1,run 1" {
			t.Errorf("logs --previous = %q, want the first run's two lines", prev)
		}
		if tail := kubectl.ok("logs", "talker", "--tail=1"); !regexp.MustCompile(`^tick \d+\n$`).MatchString(tail) {
			t.Errorf("logs --tail=1 = %q, want one tick line", tail)
		}
		ts := kubectl.ok("logs", "talker", "--timestamps", "--tail=2")
		tsLine := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z tick \d+$`)
		tl := strings.Split(strings.TrimSuffix(ts, "\n"), "\n")
		if len(tl) != 2 || !tsLine.MatchString(tl[0]) || !tsLine.MatchString(tl[1]) {
			t.Errorf("logs --timestamps --tail=2 = %q", ts)
		}
		lines, stop := kubectl.lines("logs", "-f", "--tail=1", "talker")
		defer stop()
		first := waitLine(t, lines, regexp.MustCompile(`^tick \d+$`))
		n, _ := strconv.Atoi(strings.TrimPrefix(first, "tick "))
		waitLine(t, lines, regexp.MustCompile(fmt.Sprintf(`^tick %d$`, n+2)))
		stop()
	})

	t.Run("exec", func(t *testing.T) {
		out, stderr, code := kubectl.run("hello from stdin\n", "exec", "-i", "talker", "--", "sh", "-c", "cat; echo to-stderr >&2; exit 7")
		if code != 7 || out != "hello from stdin\n" || !strings.Contains(stderr, "to-stderr") {
			t.Errorf("exec: exit %d, stdout %q, stderr %q; want 7, the input, to-stderr", code, out, stderr)
		}
		if out := kubectl.ok("exec", "web", "--", "cat", "/www/index.html"); !strings.Contains(out, "hello from nodekit") {
			t.Errorf("exec cat: %q", out)
		}
	})

	t.Run("attach", func(t *testing.T) {
		lines, stop := kubectl.lines("attach", "talker")
		defer stop()
		waitLine(t, lines, regexp.MustCompile(`^tick \d+$`))
		stop()
	})

	// kubectl attach -it, as client-go's executor speaks it: a terminal
	// of a given size, a line typed, its answer read back.
	t.Run("attach-tty", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		req := c.api.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.ns).Name("typist").SubResource("attach").
			VersionedParams(&v1.PodAttachOptions{Container: "tty", Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec)
		exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			t.Fatal(err)
		}
		inR, inW := io.Pipe()
		out := &lineWatch{re: regexp.MustCompile(`got hello`), seen: make(chan struct{})}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- exec.StreamWithContext(ctx, remotecommand.StreamOptions{
				Stdin: inR, Stdout: out, Tty: true, TerminalSizeQueue: &oneSize{ctx: ctx, size: remotecommand.TerminalSize{Width: 80, Height: 24}},
			})
		}()
		go io.WriteString(inW, "hello\r")
		select {
		case <-out.seen:
		case err := <-done:
			t.Fatalf("attach ended before the answer: %v; output %q", err, out.String())
		case <-ctx.Done():
			t.Fatalf("no answer within 60 s; output %q", out.String())
		}
		inW.Close()
		cancel()
		<-done
	})

	t.Run("port-forward", func(t *testing.T) {
		lines, stop := kubectl.lines("port-forward", "pod/web", ":8080")
		defer stop()
		l := waitLine(t, lines, regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:\d+ -> 8080$`))
		local := regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindStringSubmatch(l)[1]
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("http://127.0.0.1:" + local + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "hello from nodekit") {
			t.Errorf("page through port-forward: %d %q", resp.StatusCode, body)
		}
		stop()
	})

	t.Run("metrics", func(t *testing.T) {
		raw := kubectl.ok("get", "--raw", "/api/v1/nodes/"+c.node+"/proxy/metrics")
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(strings.NewReader(raw))
		if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		mf := mfs["kubelet_running_pods"]
		if mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() < 2 {
			t.Errorf("kubelet_running_pods: %v", mf)
		}
		if mfs["kubelet_node_name"] == nil || mfs["go_goroutines"] == nil {
			t.Errorf("/metrics lacks kubelet_node_name or go_goroutines: %d families", len(mfs))
		}
		// The kubelet's metrics of package metrics, on containerd.
		for _, name := range []string{"kubelet_started_pods_total", "kubelet_runtime_operations_total",
			"kubelet_runtime_operations_duration_seconds", "kubelet_pod_start_duration_seconds",
			"kubelet_pleg_relist_duration_seconds", "kubelet_pod_worker_duration_seconds", "kubelet_started_containers_total"} {
			if mf := mfs[name]; mf == nil || len(mf.GetMetric()) == 0 {
				t.Errorf("/metrics lacks %s", name)
			}
		}
		if v := mfs["kubelet_started_pods_total"].GetMetric(); len(v) == 1 && v[0].GetCounter().GetValue() < 2 {
			t.Errorf("kubelet_started_pods_total %v, want at least 2", v[0].GetCounter().GetValue())
		}
		if h := kubectl.ok("get", "--raw", "/api/v1/nodes/"+c.node+"/proxy/healthz"); h != "ok" {
			t.Errorf("healthz through the proxy: %q", h)
		}
	})

	t.Run("stats", func(t *testing.T) {
		var summary statsapi.Summary
		raw := kubectl.ok("get", "--raw", "/api/v1/nodes/"+c.node+"/proxy/stats/summary")
		if err := json.Unmarshal([]byte(raw), &summary); err != nil {
			t.Fatalf("decoding /stats/summary: %v\n%s", err, raw)
		}
		if summary.Node.NodeName != c.node || summary.Node.CPU == nil || summary.Node.Memory == nil || summary.Node.Memory.WorkingSetBytes == nil || summary.Node.Fs == nil {
			t.Errorf("node stats %+v", summary.Node)
		}
		var talker *statsapi.PodStats
		for i, p := range summary.Pods {
			if p.PodRef.Namespace == c.ns && p.PodRef.Name == "talker" {
				talker = &summary.Pods[i]
			}
		}
		if talker == nil || len(talker.Containers) != 1 || talker.Containers[0].Name != "main" ||
			talker.Containers[0].CPU == nil || talker.Containers[0].CPU.UsageCoreNanoSeconds == nil ||
			talker.Containers[0].Memory == nil || talker.Containers[0].Memory.WorkingSetBytes == nil ||
			talker.CPU == nil || talker.Memory == nil {
			t.Fatalf("talker's stats: %+v", talker)
		}

		res := kubectl.ok("get", "--raw", "/api/v1/nodes/"+c.node+"/proxy/metrics/resource")
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(strings.NewReader(res))
		if err != nil {
			t.Fatalf("parsing /metrics/resource: %v", err)
		}
		for _, name := range []string{"node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "pod_cpu_usage_seconds_total",
			"pod_memory_working_set_bytes", "container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_start_time_seconds"} {
			if mfs[name] == nil || len(mfs[name].GetMetric()) == 0 {
				t.Errorf("/metrics/resource lacks %s", name)
			}
		}
		if e := mfs["resource_scrape_error"]; e == nil || e.GetMetric()[0].GetGauge().GetValue() != 0 {
			t.Errorf("resource_scrape_error: %v", e)
		}
		found := false
		for _, m := range mfs["container_memory_working_set_bytes"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == c.ns && labels["pod"] == "talker" && labels["container"] == "main" && m.GetGauge().GetValue() > 0 && m.GetTimestampMs() > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no working set for talker/main with a timestamp in /metrics/resource")
		}
	})

	t.Run("unauthenticated and unauthorized", func(t *testing.T) {
		// A service account with no role: authenticated, not authorized.
		sa, err := c.api.CoreV1().ServiceAccounts(c.ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := c.api.CoreV1().ServiceAccounts(c.ns).CreateToken(t.Context(), sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
		defer transport.CloseIdleConnections()
		client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
		for _, path := range []string{"/pods", "/containerLogs/" + c.ns + "/talker/main", "/metrics", "/healthz", "/exec/" + c.ns + "/talker/main?command=ls&output=1"} {
			for _, tc := range []struct {
				token string
				want  int
			}{{"", http.StatusUnauthorized}, {"not-a-token", http.StatusUnauthorized}, {tr.Status.Token, http.StatusForbidden}} {
				req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("%s with token %.10q: %d, want %d", path, tc.token, resp.StatusCode, tc.want)
				}
			}
		}
		// Plain HTTP is not served.
		plain := &http.Transport{}
		defer plain.CloseIdleConnections()
		if resp, err := (&http.Client{Transport: plain, Timeout: 30 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/pods", port)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("plain HTTP answered 200")
			}
		}
	})

	// Last: the ephemeral container it adds would show in the stats.
	t.Run("debug", func(t *testing.T) {
		// An ephemeral container in talker's PID namespace finds talker's
		// script among its processes; its output is read with kubectl
		// logs.
		script := `for p in /proc/[0-9]*; do grep -q "tic[k]" $p/cmdline 2>/dev/null && echo sees-target && exit 0; done; echo no-target`
		out := kubectl.ok("debug", "talker", "--image="+busyboxImage, "--image-pull-policy=IfNotPresent",
			"--target=main", "-c", "debugger", "--", "sh", "-c", script)
		if !strings.Contains(out, `Targeting container "main"`) {
			t.Errorf("kubectl debug: %q", out)
		}
		eventuallyNil(t, 30*time.Second, "the debugger's ephemeral container status terminated", func() error {
			p, err := c.getPod(t.Context(), "talker")
			if err != nil {
				return err
			}
			for _, s := range p.Status.EphemeralContainerStatuses {
				if s.Name == "debugger" && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 {
					return nil
				}
			}
			return fmt.Errorf("ephemeral statuses %+v", p.Status.EphemeralContainerStatuses)
		})
		if logs := kubectl.ok("logs", "talker", "-c", "debugger"); logs != "sees-target\n" {
			t.Errorf("kubectl logs of the debugger = %q, want sees-target", logs)
		}
		// kubectl debug -i attaches to the new container's stdin: a line
		// typed is read by the container, whose answer comes back. (The
		// input stays open until the answer is in: at end of input, an
		// attach to a container that is not stdinOnce ends, as with the
		// kubelet.)
		in, lines, stop := kubectl.interactive("debug", "-i", "talker", "--image="+busyboxImage, "--image-pull-policy=IfNotPresent",
			"--target=main", "-c", "asker", "--", "sh", "-c", "read x; echo got $x")
		defer stop()
		if _, err := io.WriteString(in, "hello\n"); err != nil {
			t.Fatal(err)
		}
		waitLine(t, lines, regexp.MustCompile(`^got hello$`))
		in.Close()
		stop()
	})
}
