package integration

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestNodeAPIInMemoryRuntime serves the node API of an agent on the
// in-memory runtime, which has no streaming server of its own, and reaches
// it through the API server: pod logs, exec (the agent's streaming server
// over ExecSync) with its exit code, and /pods through the node proxy.
func TestNodeAPIInMemoryRuntime(t *testing.T) {
	path := kubeconfig(t)
	c := newClient(t, path)
	nodeName := uniqueName("nodeapi")
	cleanupNode(t, c, nodeName)
	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	rt.SetExecHandler(func(id string, cmd []string) ([]byte, []byte, int32) {
		if len(cmd) > 0 && cmd[0] == "fail" {
			return nil, []byte("failing\n"), 4
		}
		return []byte(strings.Join(cmd, " ") + "\n"), nil, 0
	})
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := nodeserver.New(nodeserver.Options{Listener: ln, Port: ln.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, path),
		Runtime:        rt,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		NodeServer:     srv,
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)
	pod := createPod(t, c, newPod(uniqueName("web"), nodeName))
	var ctrID string
	eventually(t, 30*time.Second, "the pod running", func() error {
		p, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
		}
		ctrID = strings.SplitN(p.Status.ContainerStatuses[0].ContainerID, "://", 2)[1]
		return nil
	})

	// The in-memory runtime writes no logs: write the CRI log file where
	// it says the container's log is.
	st, err := rt.ContainerStatus(t.Context(), ctrID, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(st.GetStatus().GetLogPath()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.GetStatus().GetLogPath(), []byte("2026-01-01T00:00:00.1Z stdout F hello\n2026-01-01T00:00:00.2Z stderr P wor\n2026-01-01T00:00:00.3Z stderr F ld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := int64(2)
	for _, tc := range []struct {
		opts v1.PodLogOptions
		want string
	}{
		{v1.PodLogOptions{}, "hello\nworld\n"},
		{v1.PodLogOptions{Timestamps: true}, "2026-01-01T00:00:00.100000000Z hello\n2026-01-01T00:00:00.200000000Z world\n"},
		{v1.PodLogOptions{TailLines: &tail}, "world\n"},
	} {
		got, err := c.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &tc.opts).DoRaw(t.Context())
		if err != nil || string(got) != tc.want {
			t.Errorf("logs %+v: %q, %v; want %q", tc.opts, got, err, tc.want)
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd        []string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{[]string{"echo", "hi"}, "echo hi\n", "", 0},
		{[]string{"fail"}, "", "failing\n", 4},
	} {
		req := c.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
			VersionedParams(&v1.PodExecOptions{Container: "c", Command: tc.cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		err = exec.StreamWithContext(t.Context(), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
		code := 0
		if ee, ok := err.(utilexec.ExitError); ok {
			code = ee.ExitStatus()
		} else if err != nil {
			t.Fatalf("exec %v: %v", tc.cmd, err)
		}
		if code != tc.wantStatus || stdout.String() != tc.wantOut || stderr.String() != tc.wantErr {
			t.Errorf("exec %v: exit %d stdout %q stderr %q", tc.cmd, code, stdout.String(), stderr.String())
		}
	}

	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "pods").DoRaw(t.Context())
	if err != nil || !strings.Contains(string(raw), `"name":"`+pod.Name+`"`) {
		t.Errorf("/pods through the node proxy: %v %.200s", err, raw)
	}
	if _, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "stats", "summary").DoRaw(t.Context()); err == nil {
		t.Errorf("/stats/summary of a runtime without CRI stats: no error")
	}
}
