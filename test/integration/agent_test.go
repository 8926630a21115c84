package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// requestCounter counts the API requests of a client, by kind.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int // "PATCH pods", "POST events", ...
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[requestKind(r)]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// snapshot returns the counts so far.
func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingClient returns an agent client (kubeclient, protobuf) for the test API server whose
// requests c counts.
func countingClient(t *testing.T, c *requestCounter) kubeclient.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WrapTransport = c.wrap
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// staticSource sends one snapshot, then waits.
type staticSource []*v1.Pod

func (s staticSource) Run(ctx context.Context, out chan<- []*v1.Pod) error {
	select {
	case out <- s:
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}

// TestAgentJoinsCluster runs the whole agent on the in-memory runtime,
// joined to the real API server: the Node is Ready; pods created for the
// node run and their status in the API server shows Running, Ready,
// container statuses, pod and host IPs; another node's pod is never
// touched; a static pod gets a mirror pod that is re-created when deleted;
// a kubectl-style deletion stops the pod and the agent removes it with
// grace 0. It reports the API requests per pod start.
func TestAgentJoinsCluster(t *testing.T) {
	const n = 10
	c := client(t)
	var counter requestCounter
	agentClient := countingClient(t, &counter)
	nodeName := uniqueName("agent")
	cleanupNode(t, c, nodeName)

	static := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "static-" + nodeName, Namespace: metav1.NamespaceDefault},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.example/busybox:1", Command: []string{"sleep", "3600"}}}},
	}
	sources.StaticPodDefaults(static, "/etc/nodekit/manifests/static.yaml", nodeName)
	static.Name = "static-" + nodeName // StaticPodDefaults suffixes the node name

	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     agentClient,
		Sources:        []nodekit.NamedSource{{Name: sources.FileSource, Source: staticSource{static}}},
		Runtime:        rt,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)

	eventually(t, 30*time.Second, "the Node Ready", func() error { return nodeReady(t.Context(), c, nodeName) })
	// The API server keeps the features the Node declares (its
	// NodeDeclaredFeatures gate is on), and matches pod updates with them.
	if n, err := c.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if !slices.Contains(n.Status.DeclaredFeatures, "RestartAllContainersOnContainerExits") {
		t.Errorf("the Node declares %v, want RestartAllContainersOnContainerExits among them", n.Status.DeclaredFeatures)
	}
	eventually(t, 30*time.Second, "the static pod's mirror Running", func() error {
		m, err := c.CoreV1().Pods(metav1.NamespaceDefault).Get(t.Context(), static.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if m.Annotations[sources.AnnotationMirror] != static.Annotations[sources.AnnotationHash] {
			return fmt.Errorf("mirror annotation %q, want %q", m.Annotations[sources.AnnotationMirror], static.Annotations[sources.AnnotationHash])
		}
		if m.Status.Phase != v1.PodRunning {
			return fmt.Errorf("mirror phase %q", m.Status.Phase)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // let the start settle, then count
	before := counter.snapshot()

	other := createPod(t, c, newPod(uniqueName("other"), uniqueName("other-node")))
	begin := time.Now()
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, createPod(t, c, newPod(fmt.Sprintf("%s-%d", nodeName, i), nodeName)))
	}
	eventually(t, 30*time.Second, "every pod Running and Ready in the API server", func() error {
		ready := 0
		for _, p := range pods {
			got, err := c.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := got.Status
			if s.Phase == v1.PodRunning && podCondition(s, v1.PodReady) == v1.ConditionTrue && s.PodIP != "" && s.HostIP != "" &&
				len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].ContainerID != "" && s.ContainerStatuses[0].State.Running != nil {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("%d of %d Running and Ready with container statuses and IPs", ready, n)
		}
		return nil
	})
	elapsed := time.Since(begin)
	time.Sleep(time.Second) // late writes
	after := counter.snapshot()
	writes := 0
	var detail []string
	for k, v := range after {
		d := v - before[k]
		if d == 0 {
			continue
		}
		detail = append(detail, fmt.Sprintf("%s: %d", k, d))
		if m := k[:3]; m == "POS" || m == "PAT" || m == "PUT" || m == "DEL" {
			writes += d
		}
	}
	t.Logf("%d pods Running and Ready in the API server in %v; API writes per pod start: %.2f (all requests in the window: %v)",
		n, elapsed.Round(time.Millisecond), float64(writes)/n, detail)

	got, err := c.CoreV1().Pods(other.Namespace).Get(t.Context(), other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != other.ResourceVersion {
		t.Errorf("another node's pod was touched: %+v", got.Status)
	}

	// A user deletes the mirror pod: the agent re-creates it.
	m, err := c.CoreV1().Pods(metav1.NamespaceDefault).Get(t.Context(), static.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := c.CoreV1().Pods(m.Namespace).Delete(t.Context(), m.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the mirror pod re-created", func() error {
		m2, err := c.CoreV1().Pods(metav1.NamespaceDefault).Get(t.Context(), static.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if m2.UID == m.UID {
			return fmt.Errorf("still the old mirror")
		}
		return nil
	})

	// kubectl delete: graceful; the agent stops the containers and deletes
	// the pod with grace 0.
	var running atomic.Int32
	for _, p := range pods {
		if err := c.CoreV1().Pods(p.Namespace).Delete(t.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 40*time.Second, "every deleted pod gone from the API server", func() error {
		left := 0
		for _, p := range pods {
			if _, err := c.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d pods left", left)
		}
		return nil
	})
	for _, ctr := range rt.Containers() {
		if ctr.Labels[runtime.LabelPodNamespace] == metav1.NamespaceDefault && ctr.State == 1 /* running */ && ctr.Labels[runtime.LabelPodName] != static.Name {
			running.Add(1)
		}
	}
	if running.Load() != 0 {
		t.Errorf("%d containers of deleted pods still running", running.Load())
	}
}
