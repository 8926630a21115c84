package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// findsTarget exits 0 when a process whose command line holds "3601" (the
// target's sleep) is visible, 1 otherwise; the pattern keeps the script's
// own command line from matching.
const findsTarget = `for p in /proc/[0-9]*; do grep -q "360[1]" $p/cmdline 2>/dev/null && exit 0; done; exit 1`

// TestEphemeralContainer: ephemeral containers added through the API
// server's ephemeralcontainers subresource to a running pod start on
// containerd; the one with targetContainerName sees the target's
// processes, the one without does not; both show in
// ephemeralContainerStatuses as terminated with their exit codes, are not
// started again, and leave the pod Running and Ready.
func TestEphemeralContainer(t *testing.T) {
	c := newCluster(t, false)
	c.joinedAgent(nil, "ephemeral containers")
	c.createPod(c.apiPod("target", v1.Container{Name: "main", Command: []string{"sleep", "3601"}}))
	var pod *v1.Pod
	eventuallyNil(t, 60*time.Second, "the pod Running and Ready", func() error {
		var err error
		if pod, err = c.getPod(t.Context(), "target"); err != nil {
			return err
		}
		return checkRunning(pod.Status, true)
	})
	mainID := containerIDs(pod.Status)["main"]

	ephemeral := func(name, target string) v1.EphemeralContainer {
		return v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{
				Name: name, Image: busyboxImage, ImagePullPolicy: v1.PullIfNotPresent,
				Command:                  []string{"sh", "-c", findsTarget},
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
			},
			TargetContainerName: target,
		}
	}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{ephemeral("debug", "main"), ephemeral("isolated", "")}
	if _, err := c.api.CoreV1().Pods(c.ns).UpdateEphemeralContainers(t.Context(), "target", pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the ephemeralcontainers subresource: %v", err)
	}

	exits := map[string]int32{}
	eventuallyNil(t, 60*time.Second, "both ephemeral containers terminated in the API server", func() error {
		p, err := c.getPod(t.Context(), "target")
		if err != nil {
			return err
		}
		pod = p
		if len(p.Status.EphemeralContainerStatuses) != 2 {
			return fmt.Errorf("ephemeral statuses %+v", p.Status.EphemeralContainerStatuses)
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.State.Terminated == nil {
				return fmt.Errorf("%s: %+v", s.Name, s.State)
			}
			exits[s.Name] = s.State.Terminated.ExitCode
		}
		return nil
	})
	if exits["debug"] != 0 {
		t.Errorf("the ephemeral container targeting main exited %d: it did not see main's process", exits["debug"])
	}
	if exits["isolated"] != 1 {
		t.Errorf("the ephemeral container without a target exited %d, want 1: it must not see main's process", exits["isolated"])
	}
	for _, s := range pod.Status.EphemeralContainerStatuses {
		if s.Ready || s.RestartCount != 0 || s.ContainerID == "" || !strings.HasSuffix(s.Image, busyboxImage) {
			t.Errorf("ephemeral status %s: ready %v restarts %d id %q image %q", s.Name, s.Ready, s.RestartCount, s.ContainerID, s.Image)
		}
	}
	if err := checkRunning(pod.Status, true); err != nil {
		t.Errorf("the pod after its ephemeral containers ended: %v", err)
	}
	if got := containerIDs(pod.Status)["main"]; got != mainID {
		t.Errorf("main's container changed from %s to %s", mainID, got)
	}

	// Over a few syncs of the pod (one a second), neither is started again.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		counts := map[string]int{}
		_, cs := podObjects(t, c.cri, pod.UID)
		for _, ctr := range cs {
			counts[ctr.GetMetadata().GetName()]++
		}
		if counts["debug"] != 1 || counts["isolated"] != 1 || counts["main"] != 1 {
			t.Fatalf("containerd holds %v instances, want one of each", counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestServiceLinks: a container of a pod from the API server gets the
// service-link variables of the Services of its namespace and of the API
// server's own Service (default/kubernetes), with the cluster IPs the API
// server allocated; with enableServiceLinks false only the latter.
func TestServiceLinks(t *testing.T) {
	c := newCluster(t, false)
	svc, err := c.api.CoreV1().Services(c.ns).Create(t.Context(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "back-end", Namespace: c.ns},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{
			{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(80)},
			{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	master, err := c.api.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the API server's own Service: %v", err)
	}
	c.joinedAgent(nil, "service links")
	c.createPod(c.apiPod("links", v1.Container{Name: "main", Command: []string{"sleep", "3600"}}))
	noLinks := c.apiPod("nolinks", v1.Container{Name: "main", Command: []string{"sleep", "3600"}})
	f := false
	noLinks.Spec.EnableServiceLinks = &f
	c.createPod(noLinks)

	env := func(name string) map[string]string {
		t.Helper()
		var pod *v1.Pod
		eventuallyNil(t, 60*time.Second, name+" Running and Ready", func() error {
			var err error
			if pod, err = c.getPod(t.Context(), name); err != nil {
				return err
			}
			return checkRunning(pod.Status, true)
		})
		out, stderr, err := c.cri.ExecSync(t.Context(), containerIDs(pod.Status)["main"], []string{"env"}, 10*time.Second)
		if err != nil {
			t.Fatalf("env in %s: %v (%s)", name, err, stderr)
		}
		vars := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				vars[k] = v
			}
		}
		return vars
	}
	ip, mip := svc.Spec.ClusterIP, master.Spec.ClusterIP
	if ip == "" || ip == v1.ClusterIPNone {
		t.Fatalf("the Service got cluster IP %q", ip)
	}
	want := map[string]string{
		"BACK_END_SERVICE_HOST":         ip,
		"BACK_END_SERVICE_PORT":         "8080",
		"BACK_END_SERVICE_PORT_HTTP":    "8080",
		"BACK_END_SERVICE_PORT_DNS":     "53",
		"BACK_END_PORT":                 "tcp://" + ip + ":8080",
		"BACK_END_PORT_8080_TCP":        "tcp://" + ip + ":8080",
		"BACK_END_PORT_8080_TCP_PROTO":  "tcp",
		"BACK_END_PORT_8080_TCP_PORT":   "8080",
		"BACK_END_PORT_8080_TCP_ADDR":   ip,
		"BACK_END_PORT_53_UDP":          "udp://" + ip + ":53",
		"KUBERNETES_SERVICE_HOST":       mip,
		"KUBERNETES_SERVICE_PORT":       fmt.Sprint(master.Spec.Ports[0].Port),
		"KUBERNETES_SERVICE_PORT_HTTPS": fmt.Sprint(master.Spec.Ports[0].Port),
	}
	got := env("links")
	for k, v := range want {
		if got[k] != v {
			t.Errorf("links: %s=%q, want %q", k, got[k], v)
		}
	}
	got = env("nolinks")
	if got["KUBERNETES_SERVICE_HOST"] != mip {
		t.Errorf("nolinks: KUBERNETES_SERVICE_HOST=%q, want %q", got["KUBERNETES_SERVICE_HOST"], mip)
	}
	for k := range got {
		if strings.HasPrefix(k, "BACK_END_") {
			t.Errorf("nolinks has %s with enableServiceLinks false", k)
		}
	}
}

// orphanPod's preStop hook and SIGTERM trap append to a file of a host
// directory ($OUT), so the order shows after the pod is gone.
const orphanPod = `apiVersion: v1
kind: Pod
metadata:
  name: orphan
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 10
  volumes:
  - name: out
    hostPath:
      path: $OUT
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    volumeMounts:
    - name: out
      mountPath: /out
    command: ["sh", "-c", "trap 'echo sigterm >> /out/log; exit 0' TERM; while true; do sleep 1 & wait; done"]
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo prestop >> /out/log"]
`

// TestOrphanPreStop: a pod whose manifest went away while no agent ran is
// an orphan to the next agent, which knows nothing of its spec; it still
// runs the container's preStop hook, recorded on the container, before
// SIGTERM, as the kubelet does.
func TestOrphanPreStop(t *testing.T) {
	f := newFixture(t, envEndpoint)
	out := t.TempDir()
	// The second agent knows nothing of the orphan's volumes, whose
	// mounts stay under RootDir; they go after the agents stopped.
	t.Cleanup(func() { unmountUnder(t, f.rootDir) })
	a1 := f.agent(nil, "first run")
	f.writeYAML("orphan", strings.ReplaceAll(orphanPod, "$OUT", out))
	eventually(t, 60*time.Second, "the pod Running", func() bool { return a1.running(f.pod("orphan")) })
	uid := a1.podUID(f.pod("orphan"))
	if err := a1.stop(); err != nil {
		t.Fatalf("first agent: Run: %v", err)
	}
	f.remove("orphan")

	f.agent(nil, "second run")
	eventually(t, 60*time.Second, "the orphan's sandbox and container removed", func() bool {
		sbs, cs := podObjects(t, f.cri, uid)
		return len(sbs) == 0 && len(cs) == 0
	})
	got, err := os.ReadFile(filepath.Join(out, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "prestop\nsigterm\n" {
		t.Errorf("the orphan's log file = %q, want its preStop hook, then SIGTERM", got)
	}
}
