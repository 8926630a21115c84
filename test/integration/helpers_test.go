package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
)

// kubeconfigEnv names the variable holding the test API server's
// kubeconfig.
const kubeconfigEnv = "NODEKIT_KUBECONFIG"

// kubeconfig returns the path in NODEKIT_KUBECONFIG, or skips the test.
func kubeconfig(t *testing.T) string {
	t.Helper()
	path := os.Getenv(kubeconfigEnv)
	if path == "" {
		t.Skipf("%s is unset: run `hack/apiserver.sh start` and `eval \"$(hack/apiserver.sh env)\"` to test against a real API server", kubeconfigEnv)
	}
	return path
}

// newClient returns a clientset for the kubeconfig at path.
func newClient(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// newAgentClient returns an agent's client for the kubeconfig at path:
// nodekit's own (kubeclient), speaking protobuf as the kubelet's does.
func newAgentClient(t *testing.T, path string) kubeclient.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// client returns a clientset for the shared test API server, or skips.
func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	return newClient(t, kubeconfig(t))
}

// uniqueName returns prefix with a random suffix, a valid DNS label.
func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// eventually calls f every 100 ms until it returns nil, and fails the test
// with f's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runInBackground runs run until the test ends or the returned stop is
// called; stop waits for run to return and fails the test if it returned
// an error. It also fails the test if run returns before stop.
func runInBackground(t *testing.T, name string, run func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		select {
		case err := <-done:
			t.Errorf("%s returned before it was stopped: %v", name, err)
			cancel()
			return
		default:
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Run() = %v, want nil", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s: Run did not return within 30s of cancel", name)
		}
	}
	t.Cleanup(stop)
	return stop
}

// cleanupNode deletes the Node and its Lease when the test ends.
func cleanupNode(t *testing.T, c kubernetes.Interface, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting node %s: %v", name, err)
		}
		if err := c.CoordinationV1().Leases(node.LeaseNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting lease %s: %v", name, err)
		}
	})
}

func getNode(ctx context.Context, c kubernetes.Interface, name string) (*v1.Node, error) {
	return c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func getLease(ctx context.Context, c kubernetes.Interface, name string) (*coordinationv1.Lease, error) {
	return c.CoordinationV1().Leases(node.LeaseNamespace).Get(ctx, name, metav1.GetOptions{})
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// nodeReady returns nil once the node exists and is Ready.
func nodeReady(ctx context.Context, c kubernetes.Interface, name string) error {
	n, err := getNode(ctx, c, name)
	if err != nil {
		return err
	}
	if r := readyCondition(n); r == nil || r.Status != v1.ConditionTrue {
		return fmt.Errorf("node %s not Ready: %+v", name, r)
	}
	return nil
}

// newPod is a minimal pod bound to nodeName.
func newPod(name, nodeName string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: "c", Image: "registry.example/busybox:1"}},
		},
	}
}

func createPod(t *testing.T, c kubernetes.Interface, p *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := c.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", p.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, *metav1.NewDeleteOptions(0))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting pod %s: %v", p.Name, err)
		}
	})
	return got
}

// apiServer is an API server of a test's own, run by hack/apiserver.sh.
type apiServer struct {
	t      *testing.T
	script string
	dir    string
}

// startAPIServer starts a dedicated API server, stopped when the test ends.
// It needs the binaries hack/apiserver.sh builds; it skips the test when
// the shared API server is not set up (NODEKIT_KUBECONFIG unset), since
// building them takes minutes.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	kubeconfig(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "apiserver.sh"))
	if err != nil {
		t.Fatal(err)
	}
	s := &apiServer{t: t, script: script, dir: filepath.Join(t.TempDir(), "apiserver")}
	s.run("start")
	t.Cleanup(func() { s.run("stop") })
	return s
}

func (s *apiServer) kubeconfig() string { return filepath.Join(s.dir, "kubeconfig") }

func (s *apiServer) stop()    { s.run("stop") }
func (s *apiServer) restart() { s.run("start", "--reuse") }

func (s *apiServer) run(args ...string) {
	s.t.Helper()
	begin := time.Now()
	cmd := exec.Command("bash", append([]string{s.script}, append(args, "--dir", s.dir)...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("hack/apiserver.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	s.t.Logf("hack/apiserver.sh %s: %v\n%s", strings.Join(args, " "), time.Since(begin).Round(time.Millisecond), strings.TrimSpace(string(out)))
}
