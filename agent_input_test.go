package nodekit_test

import (
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/http"
)

func podYAML(name, echo string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "echo %s; sleep 3600"]
`, name, echo)
}

// TestAgentBadManifests: bad files are logged with their path and reason;
// the good pods run and nothing panics. A file of two pods runs the first,
// as the kubelet, and reports the second as ignored.
func TestAgentBadManifests(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	bad := map[string]string{
		"garbage.yaml":   "this: is: not: yaml: [",
		"two.yaml":       podYAML("one", "1") + "---\n" + podYAML("two", "2"),
		"empty-pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: empty\nspec:\n  containers: []\n",
	}
	for name, body := range bad {
		writeManifest(t, dir, name, body)
	}
	writeManifest(t, dir, "good.yaml", podYAML("good", "ok"))
	// The same pod name twice in one source: the second is dropped.
	writeManifest(t, dir, "dup-a.yaml", podYAML("dup", "a"))
	writeManifest(t, dir, "dup-b.yaml", podYAML("dup", "b"))

	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	logs := &logBuffer{}
	h := startAgentWithLogs(t, rt, logs, nodekit.Options{Sources: []nodekit.NamedSource{fileSource(t, dir, logs.logger(t))}})
	eventually(t, waitTimeout, "good, dup and one Running", func() bool {
		return h.running("default/good-node1") && h.running("default/dup-node1") && h.running("default/one-node1")
	})
	for name := range bad {
		if !h.logs.contains(filepath.Join(dir, name)) {
			t.Errorf("no log line names %s", name)
		}
	}
	if !h.logs.contains("document 2 of 2 ignored", "two.yaml") {
		t.Error("no log line says the second document of a file was ignored")
	}
	if !h.logs.contains("dup-node1") {
		t.Error("no log line names the duplicate pod")
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 3 {
		t.Errorf("%d containers running, want 3 (good, one dup, and the first pod of two.yaml)", n)
	}

	// A file that breaks after it was good keeps its pod running.
	goodID := ""
	for _, c := range h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		if c.Labels["io.kubernetes.pod.name"] == "good-node1" {
			goodID = c.Id
		}
	}
	writeManifest(t, dir, "good.yaml", "{ broken")
	time.Sleep(2 * time.Second)
	still := false
	for _, c := range h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		still = still || c.Id == goodID
	}
	if !still {
		t.Error("the pod of a manifest that became unparsable was stopped")
	}
}

// TestAgentHTTPSource: pods served by a URL run like file pods; an edit
// replaces them; server errors, oversized bodies and slow servers are logged
// and change nothing.
func TestAgentHTTPSource(t *testing.T) {
	checkLeaks(t)
	var (
		mu   sync.Mutex
		body = "apiVersion: v1\nkind: PodList\nitems:\n- " + strings.ReplaceAll(strings.TrimPrefix(podYAML("remote", "v1"), "apiVersion: v1\n"), "\n", "\n  ")
		mode atomic.Value
	)
	mode.Store("ok")
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch mode.Load() {
		case "500":
			nethttp.Error(w, "boom", nethttp.StatusInternalServerError)
		case "huge":
			// Past MaxBodyBytes (64 KiB) in the first write, so that
			// the limit, not the timeout, ends the read on a busy machine.
			chunk := strings.Repeat("x", 1<<20)
			for range 2 {
				if _, err := w.Write([]byte(chunk)); err != nil {
					return
				}
			}
		case "slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		default:
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprint(w, body)
		}
	}))
	defer srv.Close()
	// The source logs repeated failures at V(4) after the third.
	logs := &logBuffer{verbosity: 4}
	src, err := http.New(http.Options{URL: srv.URL, NodeName: "node1", Period: 200 * time.Millisecond, Timeout: time.Second, MaxBodyBytes: 64 << 10, Logger: logs.logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	h := startAgentWithLogs(t, rt, logs, nodekit.Options{Sources: []nodekit.NamedSource{{Name: sources.HTTPSource, Source: src}}})
	eventually(t, waitTimeout, "remote Running", func() bool { return h.running("default/remote-node1") })
	first := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)[0].Id

	for _, m := range []struct{ mode, log string }{
		{"500", "500"},
		{"huge", "larger than"},
		{"slow", "deadline"},
	} {
		mode.Store(m.mode)
		eventually(t, waitTimeout, "a log line for "+m.mode, func() bool { return h.logs.contains(srv.URL, m.log) })
		running := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
		if len(running) != 1 || running[0].Id != first {
			t.Fatalf("after %s: running %v, want the first container untouched", m.mode, running)
		}
	}

	mu.Lock()
	body = strings.ReplaceAll(body, "echo v1", "echo v2")
	mu.Unlock()
	mode.Store("ok")
	eventually(t, waitTimeout, "the edited pod to replace the first", func() bool {
		running := h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
		return len(running) == 1 && running[0].Id != first && h.running("default/remote-node1")
	})
}
