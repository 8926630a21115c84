package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/status"
)

// holdingClient returns a client whose PATCH requests with a body
// containing match wait, the first one only, until release is closed;
// entered is closed when it starts waiting.
func holdingClient(t *testing.T, match string) (c kubernetes.Interface, entered, release chan struct{}) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && req.Body != nil {
				body, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
				if strings.Contains(string(body), match) {
					once.Do(func() {
						close(entered)
						select {
						case <-release:
						case <-req.Context().Done():
						}
					})
				}
			}
			return rt.RoundTrip(req)
		})
	})
	c, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, entered, release
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// agentStatus is a status as the agent generates it for a pod with one
// container "c".
func agentStatus(phase v1.PodPhase, state string, ready bool) v1.PodStatus {
	now := metav1.Now()
	cs := v1.ContainerStatus{Name: "c", Image: "registry.example/busybox:1", ImageID: "sha256:0"}
	switch state {
	case "waiting":
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case "running":
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: now}
		cs.ContainerID = "fake://c1"
	case "exited":
		cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: "fake://c1"}
		cs.ContainerID = "fake://c1"
	}
	cs.Ready = ready
	r := v1.ConditionFalse
	if ready {
		r = v1.ConditionTrue
	}
	return v1.PodStatus{
		Phase:             phase,
		HostIP:            "127.0.0.1",
		HostIPs:           []v1.HostIP{{IP: "127.0.0.1"}},
		PodIP:             "10.88.0.7",
		PodIPs:            []v1.PodIP{{IP: "10.88.0.7"}},
		StartTime:         &now,
		QOSClass:          v1.PodQOSBestEffort,
		ContainerStatuses: []v1.ContainerStatus{cs},
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: r},
			{Type: v1.ContainersReady, Status: r},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		},
	}
}

func podCondition(s v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func runStatusManager(t *testing.T, name string, opts status.Options) *status.Manager {
	t.Helper()
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.New(t).WithName(name)
	}
	m := status.NewManager(opts)
	runInBackground(t, name, m.Run)
	return m
}

// TestStatusWrittenToAPIServer: the status is patched into the status
// subresource, a condition of another owner stays, and an idle resync
// writes nothing.
func TestStatusWrittenToAPIServer(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("status-node")
	pod := createPod(t, c, newPod(uniqueName("web"), nodeName))
	// A readiness gate's controller sets its condition.
	body := `{"status":{"conditions":[{"type":"example.com/gate","status":"True"}]}}`
	pod, err := c.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	m := runStatusManager(t, "status", status.Options{Client: clientset.From(c), NodeName: nodeName, ResyncPeriod: time.Second})
	m.SetPodStatus(pod, agentStatus(v1.PodRunning, "running", true))

	eventually(t, 10*time.Second, "status Running and Ready in the API server", func() error {
		got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := got.Status
		if s.Phase != v1.PodRunning || podCondition(s, v1.PodReady) != v1.ConditionTrue || s.PodIP != "10.88.0.7" || s.HostIP != "127.0.0.1" ||
			len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("status %+v", s)
		}
		if podCondition(s, "example.com/gate") != v1.ConditionTrue {
			return fmt.Errorf("the gate's condition was lost: %+v", s.Conditions)
		}
		return nil
	})
	time.Sleep(2500 * time.Millisecond) // two resyncs
	st := m.Stats()
	t.Logf("requests: %+v", st)
	if st.Patches != 1 || st.Gets != 0 {
		t.Errorf("stats %+v, want 1 PATCH and no GET (the pod given is current; the resyncs write nothing)", st)
	}
}

// TestStatusRace forces two status updates to race.
func TestStatusRace(t *testing.T) {
	// One manager: its PATCH of the first status is held in flight while
	// two newer statuses are set; the newest ends stored.
	t.Run("newer statuses while a PATCH is in flight", func(t *testing.T) {
		c := client(t)
		nodeName := uniqueName("status-node")
		pod := createPod(t, c, newPod(uniqueName("web"), nodeName))
		held, entered, release := holdingClient(t, `"Pending"`)
		m := runStatusManager(t, "status", status.Options{Client: clientset.From(held), NodeName: nodeName, WriteDelay: -1})

		first := agentStatus(v1.PodPending, "waiting", false)
		first.Reason = "Pending"
		m.SetPodStatus(pod, first)
		<-entered
		m.SetPodStatus(pod, agentStatus(v1.PodRunning, "running", false))
		m.SetPodStatus(pod, agentStatus(v1.PodRunning, "running", true))
		close(release)

		eventually(t, 10*time.Second, "newest status stored", func() error {
			got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != v1.PodRunning || podCondition(got.Status, v1.PodReady) != v1.ConditionTrue {
				return fmt.Errorf("phase %s Ready %s", got.Status.Phase, podCondition(got.Status, v1.PodReady))
			}
			return nil
		})
		if w, v := m.WrittenVersion(pod.UID), m.Version(pod.UID); w != v {
			t.Errorf("written version %d, want %d", w, v)
		}
		t.Logf("requests: %+v", m.Stats())
	})

	// Two managers: the older status (Running) is read and its PATCH held
	// until the newer (Succeeded) is stored; released, it must not bring
	// the pod back to Running.
	t.Run("two writers", func(t *testing.T) {
		c := client(t)
		nodeName := uniqueName("status-node")
		pod := createPod(t, c, newPod(uniqueName("job"), nodeName))
		held, entered, release := holdingClient(t, `"Running"`)
		older := runStatusManager(t, "older", status.Options{Client: clientset.From(held), NodeName: nodeName, WriteDelay: -1})
		newer := runStatusManager(t, "newer", status.Options{Client: clientset.From(c), NodeName: nodeName, WriteDelay: -1})

		older.SetPodStatus(pod, agentStatus(v1.PodRunning, "running", true))
		<-entered
		newer.PodTerminated(pod.UID) // its pod workers saw the containers stop
		newer.SetPodStatus(pod, agentStatus(v1.PodSucceeded, "exited", false))
		eventually(t, 10*time.Second, "newer status stored", func() error {
			got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != v1.PodSucceeded {
				return fmt.Errorf("phase %s", got.Status.Phase)
			}
			return nil
		})
		close(release)
		eventually(t, 10*time.Second, "older writer done", func() error {
			if older.Stats().Conflicts == 0 {
				return fmt.Errorf("older writer: no conflict yet: %+v", older.Stats())
			}
			return nil
		})
		time.Sleep(time.Second)
		got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1.PodSucceeded || got.Status.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("stored phase %s container %+v; want Succeeded, terminated (no regression)", got.Status.Phase, got.Status.ContainerStatuses[0].State)
		}
		t.Logf("older: %+v, newer: %+v", older.Stats(), newer.Stats())
	})
}

// TestGracefulDeletion: a pod deleted with the default grace period is
// kept, its phase not terminal, while its containers could run; once they
// cannot, the terminal status is written and the pod deleted with grace
// period 0, long before the 30 s grace period ends.
func TestGracefulDeletion(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("status-node")
	pod := createPod(t, c, newPod(uniqueName("web"), nodeName))
	m := runStatusManager(t, "status", status.Options{Client: clientset.From(c), NodeName: nodeName})
	m.SetPodStatus(pod, agentStatus(v1.PodRunning, "running", true))
	eventually(t, 10*time.Second, "Running", func() error {
		got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return nil
	})

	begin := time.Now()
	if err := c.CoreV1().Pods(pod.Namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil || deleting.DeletionTimestamp == nil {
		t.Fatalf("after a graceful delete: %v, deletionTimestamp %v; want the pod kept with a deletion timestamp", err, deleting.DeletionTimestamp)
	}
	// The containers stopped, but the pod workers have not said so yet.
	m.SetPodStatus(deleting, agentStatus(v1.PodSucceeded, "exited", false))
	time.Sleep(time.Second)
	got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod deleted while its containers could run: %v", err)
	}
	if got.Status.Phase != v1.PodRunning || got.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("phase %s container %+v; want Running (terminal phase held back) with the container terminated", got.Status.Phase, got.Status.ContainerStatuses[0].State)
	}

	m.PodTerminated(deleting.UID) // the pod workers say so
	eventually(t, 10*time.Second, "pod deleted", func() error {
		_, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	t.Logf("deleted %v after the graceful delete (grace period 30s); requests: %+v", time.Since(begin).Round(time.Millisecond), m.Stats())
	if m.Stats().Deletes != 1 {
		t.Errorf("%d DELETEs, want 1", m.Stats().Deletes)
	}
}

// TestStatusAcrossAPIServerOutage: while the API server is down,
// SetPodStatus returns at once and the writer keeps running; once the API
// server is back, the resync writes the statuses set meanwhile.
func TestStatusAcrossAPIServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: stops and starts an API server of its own")
	}
	srv := startAPIServer(t)
	c := newClient(t, srv.kubeconfig())
	nodeName := uniqueName("status-outage")
	var pods []*v1.Pod
	for i := range 3 {
		pods = append(pods, createPod(t, c, newPod(fmt.Sprintf("%s-%d", nodeName, i), nodeName)))
	}
	m := runStatusManager(t, "status", status.Options{Client: clientset.From(c), NodeName: nodeName, ResyncPeriod: time.Second, RequestTimeout: 2 * time.Second})
	for _, p := range pods {
		m.SetPodStatus(p, agentStatus(v1.PodRunning, "running", false))
	}
	eventually(t, 10*time.Second, "statuses written", func() error {
		if w := m.Stats().Writes(); w != 3 {
			return fmt.Errorf("%d writes", w)
		}
		return nil
	})

	srv.stop()
	begin := time.Now()
	for _, p := range pods {
		m.SetPodStatus(p, agentStatus(v1.PodRunning, "running", true))
	}
	if d := time.Since(begin); d > 100*time.Millisecond {
		t.Errorf("SetPodStatus took %v with the API server down, want at once", d)
	}
	time.Sleep(5 * time.Second)
	down := m.Stats()
	srv.restart()
	up := time.Now()

	eventually(t, 30*time.Second, "statuses written after the outage", func() error {
		for _, p := range pods {
			got, err := c.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if podCondition(got.Status, v1.PodReady) != v1.ConditionTrue {
				return fmt.Errorf("pod %s Ready %s", p.Name, podCondition(got.Status, v1.PodReady))
			}
		}
		return nil
	})
	t.Logf("statuses written %v after the API server came back; requests while down (5 s, resync 1 s): %d failed; totals %+v",
		time.Since(up).Round(100*time.Millisecond), down.Failures, m.Stats())
}
