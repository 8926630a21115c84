package integration

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// podEvent waits for an event of the pod with the reason in the API server
// and returns its type and message.
func podEvent(t *testing.T, c kubernetes.Interface, pod *v1.Pod, reason string) (eventType, message string) {
	t.Helper()
	eventually(t, 30*time.Second, "a "+reason+" event of pod "+pod.Name, func() error {
		list, err := c.CoreV1().Events(pod.Namespace).List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": pod.Name, "reason": reason}.String(),
		})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no %s event", reason)
		}
		eventType, message = list.Items[0].Type, list.Items[0].Message
		return nil
	})
	return eventType, message
}

// TestAdmissionAndProbeWarningEvents, through a real API server: a pod the
// agent rejects gets phase Failed with the reason and a Warning event; an
// HTTP readiness probe redirected to another host makes the pod Ready and
// records a Warning ProbeWarning event.
func TestAdmissionAndProbeWarningEvents(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("admission")
	cleanupNode(t, c, nodeName)

	// The probe's target redirects to the same server under another host
	// name, which the probe does not follow.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, port, _ := net.SplitHostPort(r.Host)
			http.Redirect(w, r, "http://localhost:"+port+"/elsewhere", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	host, portStr, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	port, _ := strconv.Atoi(portStr)

	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, kubeconfig(t)),
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

	probed := newPod(uniqueName("redirected"), nodeName)
	probed.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Port: intstr.FromInt(port), Path: "/healthz"}},
		PeriodSeconds: 1,
	}
	probed = createPod(t, c, probed)
	rejected := newPod(uniqueName("sysctl"), nodeName)
	rejected.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
	rejected = createPod(t, c, rejected)

	eventually(t, 30*time.Second, "the rejected pod Failed in the API server", func() error {
		p, err := c.CoreV1().Pods(rejected.Namespace).Get(t.Context(), rejected.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := `Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted`
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "SysctlForbidden" || p.Status.Message != want {
			return fmt.Errorf("status %s/%s %q, want Failed/SysctlForbidden %q", p.Status.Phase, p.Status.Reason, p.Status.Message, want)
		}
		return nil
	})
	if typ, msg := podEvent(t, c, rejected, "SysctlForbidden"); typ != v1.EventTypeWarning || msg != `forbidden sysctl: "kernel.msgmax" not allowlisted` {
		t.Errorf("rejection event %s %q", typ, msg)
	}

	eventually(t, 30*time.Second, "the redirected pod Ready in the API server", func() error {
		p, err := c.CoreV1().Pods(probed.Namespace).Get(t.Context(), probed.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if podCondition(p.Status, v1.PodReady) != v1.ConditionTrue {
			return fmt.Errorf("phase %s, not Ready", p.Status.Phase)
		}
		return nil
	})
	typ, msg := podEvent(t, c, probed, "ProbeWarning")
	wantPrefix := "Readiness probe warning: Probe terminated redirects, Response body: "
	if typ != v1.EventTypeWarning || !strings.HasPrefix(msg, wantPrefix) {
		t.Errorf("probe event %s %q, want Warning %q...", typ, msg, wantPrefix)
	}
}
