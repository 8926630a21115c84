package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/runtime/process"
)

// metricsServerPath builds metrics-server with hack/metrics-server.sh
// (cached) and returns its path, or skips.
func metricsServerPath(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../../hack/metrics-server.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), script, "build").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		skipOrFail(t, "building metrics-server with %s: %v\n%s", script, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKubectlTopPod: with metrics-server (v0.8.0, built from the Go module
// proxy) registered as the metrics.k8s.io aggregated API of an API server
// of the test's own (hack/apiserver.sh's front-proxy flags), `kubectl top
// pod` shows the CPU and memory of a pod of an agent on the default
// (process) runtime, and `kubectl top node` the node's.
func TestKubectlTopPod(t *testing.T) {
	c := newCluster(t, true)
	kubectl := kubectlRunner{t: t, bin: kubectlPath(t), kubeconfig: c.kubeconfig, ns: c.ns}
	if _, err := os.Stat(filepath.Join(filepath.Dir(c.kubeconfig), "pki", "front-proxy-client.crt")); err != nil {
		t.Fatalf("the API server has no front-proxy certificate: %v", err)
	}
	ms := metricsServerPath(t)

	rt, err := process.New(process.Options{StateDir: filepath.Join(t.TempDir(), "process")})
	if err != nil {
		t.Fatal(err)
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
	a := c.agentWith(rt, "process runtime, node api", func(o *nodekit.Options) {
		o.Images = rt
		o.KubeClient = c.agentAPI
		o.NodeServer = srv
	})
	// The process runtime's pods outlive the agent: removed once it stopped.
	t.Cleanup(func() {
		_ = a.stop()
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := removeNamespace(ctx, rt, c.ns); err != nil {
			t.Errorf("removing the pods of the process runtime: %v", err)
		}
		rt.Close()
	})
	busy := c.apiPod("busy", v1.Container{
		Name:    "main",
		Command: []string{"sh", "-c", `x=$(head -c 8000000 /dev/zero | tr '\0' a); while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done`},
	})
	c.createPod(busy)

	var nodeIP string
	eventuallyNil(t, 90*time.Second, "busy running and the Node's InternalIP", func() error {
		p, err := c.getPod(t.Context(), "busy")
		if err != nil {
			return err
		}
		if err := checkRunning(p.Status, true); err != nil {
			return err
		}
		n, err := c.api.CoreV1().Nodes().Get(t.Context(), c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, addr := range n.Status.Addresses {
			if addr.Type == v1.NodeInternalIP {
				nodeIP = addr.Address
				return nil
			}
		}
		return fmt.Errorf("node %s has no InternalIP: %v", c.node, n.Status.Addresses)
	})

	// metrics-server on the node's address (an endpoint may not be a
	// loopback address), reached by the API server through the endpoints
	// of a Service without selector.
	msLn, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	msPort := msLn.Addr().(*net.TCPAddr).Port
	msLn.Close()
	var msLog syncBuffer
	cmd := exec.CommandContext(t.Context(), ms,
		"--kubeconfig="+c.kubeconfig, "--authentication-kubeconfig="+c.kubeconfig, "--authorization-kubeconfig="+c.kubeconfig,
		"--bind-address="+nodeIP, fmt.Sprintf("--secure-port=%d", msPort), "--cert-dir="+t.TempDir(),
		"--kubelet-insecure-tls", "--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port",
		"--metric-resolution=10s", "--kubelet-request-timeout=5s")
	cmd.Stdout, cmd.Stderr = &msLog, &msLog
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("metrics-server log:\n%s", msLog.String())
		}
	})
	registration := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec:
  ports: [{name: https, port: 443, targetPort: %[2]d, protocol: TCP}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: metrics-server, namespace: kube-system}
subsets: [{addresses: [{ip: %[1]s}], ports: [{name: https, port: %[2]d, protocol: TCP}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: metrics-server, namespace: kube-system, labels: {kubernetes.io/service-name: metrics-server}}
addressType: IPv4
endpoints: [{addresses: [%[1]s]}]
ports: [{name: https, port: %[2]d, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  service: {name: metrics-server, namespace: kube-system, port: 443}
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
`, nodeIP, msPort)
	if out, stderr, code := kubectl.run(registration, "apply", "--namespace", "kube-system", "-f", "-"); code != 0 {
		t.Fatalf("registering metrics-server: exit %d: %s%s", code, out, stderr)
	}

	// kubectl top pod: busy's CPU (millicores) and memory (Mi).
	top := regexp.MustCompile(`(?m)^busy\s+\d+m\s+\d+Mi\s*$`)
	var out string
	d := eventuallyNil(t, 3*time.Minute, "kubectl top pod busy", func() error {
		o, stderr, code := kubectl.run("", "top", "pod", "busy")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		if !top.MatchString(o) {
			return fmt.Errorf("output %q", o)
		}
		out = o
		return nil
	})
	t.Logf("kubectl top pod after %v:\n%s", d.Round(time.Second), out)
	node := kubectl.ok("top", "node", c.node)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.node) + `\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%`).MatchString(node) {
		t.Errorf("kubectl top node: %q", node)
	}
}
