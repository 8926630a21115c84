package nodekit_test

import (
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
	"github.com/nodekit/nodekit/sources/http"
)

// TestAgentMultiDocumentManifest: a file source made without a logger
// reports through the agent's: a manifest of several YAML documents runs
// the pod of its first, as the kubelet, and each later document is
// reported as ignored, with the reason, in the agent's log.
func TestAgentMultiDocumentManifest(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	src, err := file.New(file.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	h := startAgentWithLogs(t, rt, logs, nodekit.Options{Sources: []nodekit.NamedSource{{Name: sources.FileSource, Source: src}}})

	writeManifest(t, dir, "two.yaml", fmt.Sprintf(webManifest, "v1")+"---\n"+secondDocument)
	eventually(t, waitTimeout, "web Running", func() bool { return h.running("default/web-node1") })
	eventually(t, waitTimeout, "the second document reported in the agent's log", func() bool {
		return logs.contains(`"msg"="manifest document ignored"`, "two.yaml", "document 2 of 2", "a manifest file gives one pod")
	})
	if _, ok := h.status("default/other-node1"); ok {
		t.Error("the second document's pod was started")
	}
}

// secondDocument is the pod of a manifest's second YAML document.
const secondDocument = `apiVersion: v1
kind: Pod
metadata:
  name: other
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sleep", "3600"]
`

// TestAgentMultiDocumentURL: an HTTP source made without a logger reports
// through the agent's: a body of several YAML documents runs the pod of
// its first, as the kubelet, and each later document is reported as
// ignored, with the reason, in the agent's log.
func TestAgentMultiDocumentURL(t *testing.T) {
	checkLeaks(t)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		_, _ = w.Write([]byte(fmt.Sprintf(webManifest, "v1") + "---\n" + secondDocument))
	}))
	defer srv.Close()
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	src, err := http.New(http.Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	h := startAgentWithLogs(t, rt, logs, nodekit.Options{Sources: []nodekit.NamedSource{{Name: sources.HTTPSource, Source: src}}})
	eventually(t, waitTimeout, "web Running", func() bool { return h.running("default/web-node1") })
	eventually(t, waitTimeout, "the second document reported in the agent's log", func() bool {
		return logs.contains(`"msg"="manifest document ignored"`, srv.URL, "document 2 of 2", "as the kubelet reads it")
	})
	if _, ok := h.status("default/other-node1"); ok {
		t.Error("the second document's pod was started")
	}
}
