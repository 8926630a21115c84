package nodekit_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestNodeServerDeps keeps the node API out of an agent that does not
// serve it: the root package must not depend on package nodeserver, the
// node API's HTTP server and streaming (nodeapi, k8s.io/cri-streaming,
// SPDY, WebSocket, apimachinery's upgrade-aware proxy) or Prometheus
// (package metrics, client_golang, whose initialization makes a default
// registry with the Go and process collectors). Measured on the idle
// agent of BenchmarkMemory, they cost 2.7 MiB of resident memory
// (base-rss-MiB 29.9 with them, 27.2 without), mostly pages of the binary
// their code and initialization touch.
func TestNodeServerDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const root = "github.com/nodekit/nodekit"
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", root).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = p.Imports
	}
	bad := func(p string) bool {
		for _, prefix := range []string{
			root + "/nodeserver", root + "/nodeapi", root + "/metrics",
			"github.com/prometheus/", "k8s.io/cri-streaming/", "github.com/moby/spdystream",
			"golang.org/x/net/websocket", "k8s.io/apimachinery/pkg/util/proxy",
		} {
			if p == prefix || strings.HasPrefix(p, strings.TrimSuffix(prefix, "/")+"/") {
				return true
			}
		}
		return false
	}
	// Breadth first from the root package; via records the import each
	// package was reached from, to name the chain.
	via := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if bad(p) {
			chain := []string{p}
			for q := via[p]; q != ""; q = via[q] {
				chain = append([]string{q}, chain...)
			}
			t.Errorf("the root package depends on %s: %s; the node API belongs to package nodeserver", p, strings.Join(chain, " -> "))
			continue
		}
		for _, imp := range imports[p] {
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = p
			queue = append(queue, imp)
		}
	}
	if len(via) < 100 {
		t.Fatalf("go list found %d packages under %s: the walk is broken", len(via), root)
	}
}
