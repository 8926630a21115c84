package hollow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient"
)

const kubeconfigEnv = "NODEKIT_KUBECONFIG"

// restConfig reads NODEKIT_KUBECONFIG, or skips.
func restConfig(tb testing.TB) *rest.Config {
	tb.Helper()
	path := os.Getenv(kubeconfigEnv)
	if path == "" {
		tb.Skipf("%s is unset: run `hack/apiserver.sh start` and `eval \"$(hack/apiserver.sh env)\"` to run hollow nodes against a real API server", kubeconfigEnv)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

var seq atomic.Int64

func uniquePrefix(p string) string {
	return fmt.Sprintf("%s-%d-%d", p, time.Now().Unix()%100000, seq.Add(1))
}

type podLister interface {
	List(context.Context, metav1.ListOptions) (*v1.PodList, error)
}

type nodeDeleter interface {
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func testClient(tb testing.TB, cfg *rest.Config) *kubeclient.Clientset {
	tb.Helper()
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1000, 2000
	cs, err := kubeclient.NewForConfig(c)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func newPod(name, nodeName, label string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"hollow-test": label}},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// createPods creates perNode pods on each node and returns their count.
func createPods(tb testing.TB, c kubeclient.Interface, nodes []string, perNode int, label string) int {
	tb.Helper()
	ctx := tb.Context()
	n := 0
	for _, node := range nodes {
		for j := range perNode {
			if _, err := c.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, newPod(node+"-"+strconv.Itoa(j), node, label), metav1.CreateOptions{}); err != nil {
				tb.Fatal(err)
			}
			n++
		}
	}
	return n
}

// waitRunning waits until want pods labelled label run.
func waitRunning(tb testing.TB, c kubeclient.Interface, label string, want int, timeout time.Duration) {
	tb.Helper()
	pods := c.CoreV1().Pods(metav1.NamespaceDefault).(podLister)
	deadline := time.Now().Add(timeout)
	for {
		list, err := pods.List(tb.Context(), metav1.ListOptions{LabelSelector: "hollow-test=" + label})
		running := 0
		if err == nil {
			for i := range list.Items {
				if list.Items[i].Status.Phase == v1.PodRunning {
					running++
				}
			}
			if running == want {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d pods running after %s (last error: %v)", running, want, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cleanUp deletes the pods labelled label and the nodes, at once.
func cleanUp(tb testing.TB, c kubeclient.Interface, label string, nodes []string) {
	ctx := context.Background()
	zero := int64(0)
	pods := c.CoreV1().Pods(metav1.NamespaceDefault)
	if list, err := pods.(podLister).List(ctx, metav1.ListOptions{LabelSelector: "hollow-test=" + label}); err == nil {
		for _, p := range list.Items {
			_ = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	for _, n := range nodes {
		_ = c.CoreV1().Nodes().(nodeDeleter).Delete(ctx, n, metav1.DeleteOptions{})
	}
}

func TestStart(t *testing.T) {
	cfg := restConfig(t)
	c := testClient(t, cfg)
	prefix := uniquePrefix("hollow-test")
	nodes, err := Start(t.Context(), cfg, 3, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	names := nodes.Names()
	t.Cleanup(func() { cleanUp(t, c, prefix, names) })
	if len(names) != 3 || names[0] != prefix+"-0" {
		t.Fatalf("names %v", names)
	}
	// Start returned: every Node is Ready, with the capacity asked for.
	for _, name := range names {
		n, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ready(n) {
			t.Errorf("node %s not Ready: %v", name, n.Status.Conditions)
		}
		if got := n.Status.Capacity.Cpu().String(); got != "8" {
			t.Errorf("node %s: cpu capacity %s, want 8", name, got)
		}
	}
	// Pods bound to the nodes run, and each node's pods are its own.
	want := createPods(t, c, names, 2, prefix)
	waitRunning(t, c, prefix, want, time.Minute)
	list, err := c.CoreV1().Pods(metav1.NamespaceDefault).(podLister).List(t.Context(), metav1.ListOptions{LabelSelector: "hollow-test=" + prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Status.HostIP == "" || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("pod %s on %s: status %+v", p.Name, p.Spec.NodeName, p.Status)
		}
	}
	if err := nodes.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := nodes.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(nodes.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s left after Stop: %v", nodes.dir, err)
	}
}

func TestStartBadInput(t *testing.T) {
	for _, n := range []int{0, -1, MaxNodes + 1} {
		if _, err := Start(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}, n, Options{}); err == nil {
			t.Errorf("Start of %d nodes: no error", n)
		}
	}
	if _, err := Start(t.Context(), nil, 1, Options{}); err == nil {
		t.Error("Start without a config: no error")
	}
	if _, err := Start(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}, 1, Options{ReadyTimeout: -time.Second}); err == nil {
		t.Error("Start with a negative ReadyTimeout: no error")
	}
}

// An API server that does not answer fails Start after ReadyTimeout, with
// nothing left running and the nodes' directory removed.
func TestStartUnreachable(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	for _, unshared := range []bool{false, true} {
		dir := t.TempDir()
		_, err := Start(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}, 2, Options{
			ReadyTimeout: 2 * time.Second, Unshared: unshared, Dir: dir,
		})
		if err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
			t.Errorf("unshared %v: Start against no API server: %v, want a deadline error", unshared, err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("unshared %v: the nodes' directory given is gone: %v", unshared, err)
		}
	}
}

// requestCounter counts an API client's requests: watches by resource,
// GETs of single Nodes and updates of Leases.
type requestCounter struct {
	mu          sync.Mutex
	watches     map[string]int
	nodeGets    int
	leaseWrites int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		c.mu.Lock()
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			c.watches[parts[len(parts)-1]]++
		case r.Method == http.MethodGet && len(parts) == 4 && parts[2] == "nodes":
			c.nodeGets++
		case r.Method == http.MethodPut && len(parts) == 7 && parts[5] == "leases":
			c.leaseWrites++
		}
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) leases() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseWrites
}

func (c *requestCounter) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.watches), c.nodeGets
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The nodes of one Start watch each resource once for the process, and
// their status passes read the Node from the shared watch, not with a GET
// every 10s; with Unshared, each node watches on its own and GETs its Node.
func TestStartShares(t *testing.T) {
	cfg := restConfig(t)
	c := testClient(t, cfg)
	const n = 4
	for _, unshared := range []bool{false, true} {
		t.Run(fmt.Sprintf("unshared=%v", unshared), func(t *testing.T) {
			counter := &requestCounter{watches: map[string]int{}}
			wcfg := rest.CopyConfig(cfg)
			wcfg.WrapTransport = counter.wrap
			prefix := uniquePrefix("hollow-share")
			nodes, err := Start(t.Context(), wcfg, n, Options{Prefix: prefix, Unshared: unshared})
			if err != nil {
				t.Fatal(err)
			}
			names := nodes.Names()
			t.Cleanup(func() { cleanUp(t, c, prefix, names) })
			defer nodes.Stop()
			_, getsBefore := counter.snapshot()
			leasesBefore := counter.leases()
			time.Sleep(11 * time.Second) // one status pass and Lease renewal of every node
			watches, gets := counter.snapshot()
			gets -= getsBefore
			leases := counter.leases() - leasesBefore
			t.Logf("watches %v; %d GETs of a Node, %d Lease renewals in 11s", watches, gets, leases)
			// Every node renews its Lease every 10s (plus up to 4%), on
			// goroutines of its own or started by the shared Driver.
			if leases < n || leases > 2*n {
				t.Errorf("%d Lease renewals in 11s, want one or two per node", leases)
			}
			for _, res := range []string{"pods", "services", "runtimeclasses"} {
				if unshared && watches[res] < n {
					t.Errorf("unshared: %d watches of %s, want one per node", watches[res], res)
				}
				if !unshared && watches[res] != 1 {
					t.Errorf("shared: %d watches of %s, want 1", watches[res], res)
				}
			}
			if unshared && gets < n {
				t.Errorf("unshared: %d GETs of a Node in a status period, want one per node", gets)
			}
			if !unshared && gets != 0 {
				t.Errorf("shared: %d GETs of a Node in a status period, want 0", gets)
			}
			// Pods still run on each node, through the shared watch.
			want := createPods(t, c, names, 1, prefix)
			waitRunning(t, c, prefix, want, time.Minute)
			if err := nodes.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}
