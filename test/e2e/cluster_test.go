package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// envKubeconfig names the kubeconfig of the API server the cluster tests
// join (hack/test.sh starts one and sets it when run as root).
const envKubeconfig = "NODEKIT_KUBECONFIG"

// kubeconfigPath returns the path in NODEKIT_KUBECONFIG, or skips the test:
// hack/test.sh may run without an API server (NODEKIT_APISERVER=0), so an
// unset variable never fails the test.
func kubeconfigPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv(envKubeconfig)
	if p == "" {
		t.Skipf("%s is not set: the cluster tests need a kube-apiserver; run hack/test.sh as root (it starts one), or hack/apiserver.sh start and eval \"$(hack/apiserver.sh env)\"", envKubeconfig)
	}
	return p
}

// kubeClient returns a clientset for the kubeconfig at path; its idle
// connections are closed when the test ends, so that no connection
// goroutine outlives it.
func kubeClient(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, hc := restConfig(t, path, "")
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// agentKubeClient returns the agent's client for the kubeconfig at path:
// nodekit's own (kubeclient), speaking protobuf as the kubelet's does; its
// idle connections are closed when the test ends.
func agentKubeClient(t *testing.T, path string) kubeclient.Interface {
	t.Helper()
	cfg, hc := restConfig(t, path, "application/vnd.kubernetes.protobuf")
	cs, err := kubeclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// restConfig reads the kubeconfig at path, with the kubelet's QPS and
// burst and the content type given ("" for client-go's default), and
// returns it with an HTTP client whose idle connections are closed when the
// test ends (client-go wraps the transport: http.Client.CloseIdleConnections
// would not reach it).
func restConfig(t *testing.T, path, contentType string) (*rest.Config, *http.Client) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 15 * time.Second
	cfg.ContentType = contentType
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(hc.Transport) })
	return cfg, hc
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	points, err := mountsUnder(dir)
	if err != nil {
		t.Errorf("reading the mounts below %s: %v", dir, err)
		return
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := syscall.Unmount(p, 0); err != nil {
			t.Errorf("unmounting %s: %v", p, err)
		}
	}
}

// cluster is a fixture whose agent joins an API server: the test's
// namespace exists there too, and the test's pods, namespace, Node and
// Lease are deleted from it when the test ends.
type cluster struct {
	*fixture
	kubeconfig string
	api        kubernetes.Interface // the test's own client
	agentAPI   kubeclient.Interface // the agent's
	srv        *ownAPIServer        // the test's own API server, or nil
}

// newCluster connects to containerd (NODEKIT_CRI_ENDPOINT) and to the
// shared API server (NODEKIT_KUBECONFIG), or, with own, to an API server of
// the test's own; it skips the test when either variable is unset.
func newCluster(t *testing.T, own bool) *cluster {
	t.Helper()
	kubeconfigPath(t)
	return newClusterOn(t, newFixture(t, envEndpoint), own)
}

// newClusterOn is newCluster on the fixture f (e.g. on a containerd of the
// test's own).
func newClusterOn(t *testing.T, f *fixture, own bool) *cluster {
	t.Helper()
	kubeconfig := kubeconfigPath(t)
	c := &cluster{fixture: f}
	if own {
		// Started after the fixture, so that it is stopped (closing the
		// clients' connections) before the fixture checks for leaked
		// goroutines.
		c.srv = startOwnAPIServer(t)
		kubeconfig = c.srv.kubeconfig()
	}
	c.kubeconfig = kubeconfig
	// The agent leaves its pods, and their secret volumes' tmpfs mounts,
	// when it stops; they go after it stopped, before RootDir is removed.
	t.Cleanup(func() { unmountUnder(t, c.rootDir) })
	c.api = kubeClient(t, kubeconfig)
	c.agentAPI = agentKubeClient(t, kubeconfig)
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}
	if _, err := c.api.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", c.ns, err)
	}
	// Registered before the agent starts: it runs after the agent stopped.
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		zero := int64(0)
		pods := c.api.CoreV1().Pods(c.ns)
		var items []v1.Pod
		if list, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
			t.Logf("listing the test's pods in the API server: %v", err)
		} else {
			items = list.Items
		}
		for _, p := range items {
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting pod %s: %v", p.Name, err)
			}
		}
		deletions := []struct {
			what string
			del  func() error
		}{
			{"namespace " + c.ns, func() error { return c.api.CoreV1().Namespaces().Delete(ctx, c.ns, metav1.DeleteOptions{}) }},
			{"node " + c.node, func() error { return c.api.CoreV1().Nodes().Delete(ctx, c.node, metav1.DeleteOptions{}) }},
			{"lease " + c.node, func() error {
				return c.api.CoordinationV1().Leases(node.LeaseNamespace).Delete(ctx, c.node, metav1.DeleteOptions{})
			}},
		}
		for _, d := range deletions {
			if err := d.del(); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting %s: %v", d.what, err)
			}
		}
	})
	return c
}

// joinedAgent starts the whole agent on containerd (rs, or the fixture's
// CRI client), joined to the API server with short periods: node status
// every second, the pod source retrying at most every 2s, secret volumes
// refreshed every 2s.
func (c *cluster) joinedAgent(rs runtime.RuntimeService, description string) *agentRun {
	c.t.Helper()
	return c.agentWith(rs, description, func(o *nodekit.Options) {
		o.KubeClient = c.agentAPI
		o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
		o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
		o.Volumes.RefreshPeriod = 2 * time.Second
	})
}

// createPod creates pod in the API server.
func (c *cluster) createPod(p *v1.Pod) *v1.Pod {
	c.t.Helper()
	got, err := c.api.CoreV1().Pods(p.Namespace).Create(c.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("creating pod %s: %v", p.Name, err)
	}
	return got
}

// getPod returns the API server's pod name of the test's namespace.
func (c *cluster) getPod(ctx context.Context, name string) (*v1.Pod, error) {
	return c.api.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
}

// nodeReady returns nil once the agent's Node is Ready with a heartbeat
// after since.
func (c *cluster) nodeReady(ctx context.Context, since time.Time) error {
	n, err := c.api.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type != v1.NodeReady {
			continue
		}
		if cond.Status != v1.ConditionTrue {
			return fmt.Errorf("node %s: Ready is %s (%s: %s)", c.node, cond.Status, cond.Reason, cond.Message)
		}
		if !cond.LastHeartbeatTime.After(since) {
			return fmt.Errorf("node %s: last heartbeat %v, none since %v", c.node, cond.LastHeartbeatTime.Time, since)
		}
		return nil
	}
	return fmt.Errorf("node %s has no Ready condition", c.node)
}

// apiPod is a pod of the test's namespace bound to the agent's node.
func (c *cluster) apiPod(name string, ctr v1.Container, volumes ...v1.Volume) *v1.Pod {
	grace := int64(2)
	ctr.Image = busyboxImage
	ctr.ImagePullPolicy = v1.PullIfNotPresent
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: v1.PodSpec{
			NodeName:                      c.node,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{ctr},
			Volumes:                       volumes,
		},
	}
}

// eventuallyNil calls f every 100ms until it returns nil and returns how
// long that took, or fails the test with f's last error after timeout.
func eventuallyNil(t *testing.T, timeout time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// podCondition returns the status of the pod condition of type typ.
func podCondition(s v1.PodStatus, typ v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// checkRunning returns nil when status shows phase Running, Ready as
// wantReady, pod and host IPs, and every container running with an ID,
// ready as wantReady and never restarted.
func checkRunning(s v1.PodStatus, wantReady bool) error {
	ready := v1.ConditionFalse
	if wantReady {
		ready = v1.ConditionTrue
	}
	switch {
	case s.Phase != v1.PodRunning:
		return fmt.Errorf("phase %q, want Running", s.Phase)
	case podCondition(s, v1.PodReady) != ready:
		return fmt.Errorf("Ready condition %q, want %q", podCondition(s, v1.PodReady), ready)
	case s.PodIP == "" || s.HostIP == "":
		return fmt.Errorf("pod IP %q, host IP %q", s.PodIP, s.HostIP)
	case len(s.ContainerStatuses) == 0:
		return errors.New("no container statuses")
	}
	for _, cs := range s.ContainerStatuses {
		switch {
		case cs.State.Running == nil:
			return fmt.Errorf("container %s not running: %+v", cs.Name, cs.State)
		case cs.ContainerID == "":
			return fmt.Errorf("container %s has no ID", cs.Name)
		case cs.Ready != wantReady:
			return fmt.Errorf("container %s ready %t, want %t", cs.Name, cs.Ready, wantReady)
		case cs.RestartCount != 0:
			return fmt.Errorf("container %s restarted %d times", cs.Name, cs.RestartCount)
		}
	}
	return nil
}

// containerIDs returns the status's container IDs by container name,
// without the runtime prefix.
func containerIDs(s v1.PodStatus) map[string]string {
	ids := map[string]string{}
	for _, cs := range s.ContainerStatuses {
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		ids[cs.Name] = id
	}
	return ids
}

// TestSecretVolume: a pod created in the API server for the agent's node
// mounts a Secret as a volume; on containerd, `cat` in its container shows
// the secret's value, the pod's status in the API server is Running and
// Ready, and once the Secret is updated the container sees the new value
// within 10s (the agent refreshes secret volumes every 2s here).
func TestSecretVolume(t *testing.T) {
	c := newCluster(t, false)
	secrets := c.api.CoreV1().Secrets(c.ns)
	secret, err := secrets.Create(t.Context(), &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: c.ns},
		Data:       map[string][]byte{"key": []byte("first value"), "other": []byte("unchanged")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := c.joinedAgent(nil, "secret volume")
	c.createPod(c.apiPod("secret",
		v1.Container{
			Name:         "main",
			Command:      []string{"sleep", "3600"},
			VolumeMounts: []v1.VolumeMount{{Name: "creds", MountPath: "/secret", ReadOnly: true}},
		},
		v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}}))

	var pod *v1.Pod
	took := eventuallyNil(t, 60*time.Second, "the pod Running and Ready in the API server", func() error {
		var err error
		if pod, err = c.getPod(t.Context(), "secret"); err != nil {
			return err
		}
		return checkRunning(pod.Status, true)
	})
	t.Logf("pod Running and Ready in the API server after %v", took.Round(time.Millisecond))
	if !a.running(c.ns + "/secret") {
		t.Errorf("the agent's own status of the pod is not Running: %+v", a.phase(c.ns+"/secret"))
	}
	id := containerIDs(pod.Status)["main"]
	if _, cs := podObjects(t, c.cri, pod.UID); len(cs) != 1 || cs[0].Id != id || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("containerd holds %d containers of the pod (%v), want the running %s the API server shows", len(cs), cs, id)
	}

	cat := func(file string) (string, error) {
		out, stderr, err := c.cri.ExecSync(t.Context(), id, []string{"cat", file}, 10*time.Second)
		if err != nil {
			return "", fmt.Errorf("ExecSync cat %s: %w (stderr %q)", file, err, stderr)
		}
		return string(out), nil
	}
	for file, want := range map[string]string{"/secret/key": "first value", "/secret/other": "unchanged"} {
		if got, err := cat(file); err != nil || got != want {
			t.Errorf("cat %s in the container = %q, %v; want %q", file, got, err, want)
		}
	}
	if _, stderr, err := c.cri.ExecSync(t.Context(), id, []string{"sh", "-c", "echo x > /secret/key"}, 10*time.Second); err == nil {
		t.Errorf("writing /secret/key in the container succeeded; the mount is read-only (stderr %q)", stderr)
	}

	secret.Data["key"] = []byte("second value")
	if _, err := secrets.Update(t.Context(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took = eventuallyNil(t, 10*time.Second, "the container seeing the secret's new value", func() error {
		got, err := cat("/secret/key")
		if err != nil {
			return err
		}
		if got != "second value" {
			return fmt.Errorf("cat /secret/key = %q", got)
		}
		return nil
	})
	t.Logf("the container saw the updated secret %v after the update", took.Round(time.Millisecond))
	if got, err := cat("/secret/other"); err != nil || got != "unchanged" {
		t.Errorf("cat /secret/other after the update = %q, %v; want %q", got, err, "unchanged")
	}
	if _, cs := podObjects(t, c.cri, pod.UID); len(cs) != 1 || cs[0].Id != id {
		t.Errorf("containerd holds %d containers of the pod after the update, want only %s: %v", len(cs), id, cs)
	}
	pod, err = c.getPod(t.Context(), "secret")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkRunning(pod.Status, true); err != nil {
		t.Errorf("after the update, the pod in the API server: %v", err)
	}
}

// ownAPIServer is an API server of the test's own, run by
// hack/apiserver.sh, which the test may stop and start again.
type ownAPIServer struct {
	t      *testing.T
	script string
	dir    string
}

// startOwnAPIServer starts a dedicated API server, stopped when the test
// ends. Call it only when NODEKIT_KUBECONFIG is set: without the shared API
// server the binaries may not be built (which takes minutes).
func startOwnAPIServer(t *testing.T) *ownAPIServer {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "apiserver.sh"))
	if err != nil {
		t.Fatal(err)
	}
	s := &ownAPIServer{t: t, script: script, dir: filepath.Join(t.TempDir(), "api")}
	s.run("start")
	t.Cleanup(func() { s.run("stop") })
	return s
}

func (s *ownAPIServer) kubeconfig() string { return filepath.Join(s.dir, "kubeconfig") }

func (s *ownAPIServer) run(args ...string) {
	s.t.Helper()
	begin := time.Now()
	out, err := exec.Command("bash", append([]string{s.script}, append(args, "--dir", s.dir)...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("hack/apiserver.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	s.t.Logf("hack/apiserver.sh %s: %v", strings.Join(args, " "), time.Since(begin).Round(time.Millisecond))
}

// apiOutage is how long TestAPIServerOutage keeps its API server down.
const apiOutage = 30 * time.Second

// runningPod is what containerd ran for a pod before the outage.
type runningPod struct {
	name       string
	uid        types.UID
	sandbox    string
	containers map[string]string // name → ID
	ready      bool              // the Ready the API server must show after the outage
}

// checkUnchanged returns nil when containerd holds exactly p's sandbox,
// ready, and p's containers, running and never restarted.
func checkUnchanged(t *testing.T, rs runtime.RuntimeService, p runningPod) error {
	sbs, cs := podObjects(t, rs, p.uid)
	if len(sbs) != 1 || sbs[0].Id != p.sandbox || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return fmt.Errorf("pod %s: sandboxes %v, want only %s, ready", p.name, sbs, p.sandbox)
	}
	got := map[string]string{}
	for _, ctr := range cs {
		if ctr.State != runtimeapi.ContainerState_CONTAINER_RUNNING || ctr.Metadata.GetAttempt() != 0 {
			return fmt.Errorf("pod %s: container %s (%s) in state %s, attempt %d", p.name, ctr.Metadata.GetName(), ctr.Id, ctr.State, ctr.Metadata.GetAttempt())
		}
		got[ctr.Metadata.GetName()] = ctr.Id
	}
	if len(got) != len(cs) || !maps.Equal(got, p.containers) {
		return fmt.Errorf("pod %s: containers %v, want %v", p.name, cs, p.containers)
	}
	return nil
}

// TestAPIServerOutage: the whole agent on containerd, joined to an API
// server of the test's own, runs three pods created through the API (one
// with a readiness probe that fails). The API server is stopped for 30s:
// meanwhile containerd holds the same sandboxes and containers, running,
// and the probed pod turns Ready in the agent (a status it cannot write).
// Once the API server is back (same data, ports and credentials) the
// agent resyncs within 30s: every pod Running and Ready in the API server
// with the container IDs containerd runs and no restart, the Node Ready
// again; the agent created, started, stopped and removed nothing.
func TestAPIServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the outage takes over 30s")
	}
	c := newCluster(t, true)
	rs, counter := newCounting(c.cri)
	a := c.joinedAgent(rs, "API server outage")
	eventuallyNil(t, 30*time.Second, "the Node Ready", func() error { return c.nodeReady(t.Context(), time.Time{}) })

	sleeper := v1.Container{Name: "main", Command: []string{"sh", "-c", sleepScript}}
	probed := sleeper
	probed.ReadinessProbe = &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
		PeriodSeconds:  1,
		TimeoutSeconds: 10, // a slow exec on a loaded machine is no failure
	}
	pods := []runningPod{{name: "first", ready: true}, {name: "second", ready: true}, {name: "probed", ready: true}}
	for _, p := range pods {
		ctr := sleeper
		if p.name == "probed" {
			ctr = probed
		}
		c.createPod(c.apiPod(p.name, ctr))
	}
	took := eventuallyNil(t, 60*time.Second, "every pod Running in the API server (the probed one not Ready)", func() error {
		for i, p := range pods {
			got, err := c.getPod(t.Context(), p.name)
			if err != nil {
				return err
			}
			if err := checkRunning(got.Status, p.name != "probed"); err != nil {
				return fmt.Errorf("pod %s: %w", p.name, err)
			}
			pods[i].uid = got.UID
			pods[i].containers = containerIDs(got.Status)
		}
		return nil
	})
	t.Logf("3 pods Running in the API server after %v", took.Round(time.Millisecond))
	for i, p := range pods {
		sbs, _ := podObjects(t, c.cri, p.uid)
		if len(sbs) != 1 {
			t.Fatalf("pod %s: %d sandboxes, want 1: %v", p.name, len(sbs), sbs)
		}
		pods[i].sandbox = sbs[0].Id
		if err := checkUnchanged(t, c.cri, pods[i]); err != nil {
			t.Fatalf("before the outage, containerd does not run what the API server shows: %v", err)
		}
	}
	callsBefore := len(counter.Calls())

	c.srv.run("stop")
	down := time.Now()
	t.Logf("API server down for %v", apiOutage)
	probedReady := false
	for time.Since(down) < apiOutage {
		for _, p := range pods {
			if err := checkUnchanged(t, c.cri, p); err != nil {
				t.Fatalf("%v into the outage: %v", time.Since(down).Round(time.Second), err)
			}
			if s, _ := a.status(c.ns + "/" + p.name); s.Phase != v1.PodRunning {
				t.Fatalf("%v into the outage: the agent's status of pod %s has phase %q", time.Since(down).Round(time.Second), p.name, s.Phase)
			}
		}
		if !probedReady && time.Since(down) > 5*time.Second {
			if _, stderr, err := c.cri.ExecSync(t.Context(), pods[2].containers["main"], []string{"touch", "/tmp/ready"}, 10*time.Second); err != nil {
				t.Fatalf("touch /tmp/ready in the probed pod: %v (stderr %q)", err, stderr)
			}
			took := eventuallyNil(t, 10*time.Second, "the probed pod Ready in the agent during the outage", func() error {
				s, _ := a.status(c.ns + "/probed")
				if podCondition(s, v1.PodReady) != v1.ConditionTrue {
					return fmt.Errorf("Ready condition %q", podCondition(s, v1.PodReady))
				}
				return nil
			})
			t.Logf("the probed pod turned Ready in the agent %v after its file appeared, with the API server down", took.Round(time.Millisecond))
			probedReady = true
		}
		time.Sleep(time.Second)
	}
	restart := time.Now()
	c.srv.run("start", "--reuse")
	up := time.Now()

	took = eventuallyNil(t, 30*time.Second, "the statuses correct again in the API server", func() error {
		for _, p := range pods {
			got, err := c.getPod(t.Context(), p.name)
			if err != nil {
				return err
			}
			if err := checkRunning(got.Status, p.ready); err != nil {
				return fmt.Errorf("pod %s: %w", p.name, err)
			}
			if ids := containerIDs(got.Status); !maps.Equal(ids, p.containers) {
				return fmt.Errorf("pod %s: container IDs %v, containerd runs %v", p.name, ids, p.containers)
			}
		}
		return nil
	})
	t.Logf("every pod's status correct in the API server %v after hack/apiserver.sh start --reuse returned (%v after it began)",
		took.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
	eventuallyNil(t, 30*time.Second, "the Node Ready again", func() error { return c.nodeReady(t.Context(), up.Add(-time.Second)) })
	t.Logf("the Node Ready with a fresh heartbeat %v after the API server came back", time.Since(up).Round(time.Millisecond))

	for _, p := range pods {
		if err := checkUnchanged(t, c.cri, p); err != nil {
			t.Errorf("after the outage: %v", err)
		}
	}
	if sbs, cs := inNamespace(t, c.cri, c.ns); len(sbs) != len(pods) || len(cs) != len(pods) {
		t.Errorf("containerd holds %d sandboxes and %d containers of the test, want %d of each", len(sbs), len(cs), len(pods))
	}
	var changes []string
	for _, call := range counter.Calls()[callsBefore:] {
		changes = append(changes, fmt.Sprintf("%s %s at %s", call.Method, call.ID, call.At.Format("15:04:05.000")))
	}
	if len(changes) > 0 {
		t.Errorf("the agent changed containerd's state across the outage: %s", strings.Join(changes, "; "))
	}
}
