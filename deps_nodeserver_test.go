package nodekit_test

import (
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
	const root = "github.com/nodekit/nodekit"
	bad := func(p string) bool {
		if p == root+"/nodeserver/hook" {
			return false // the contract's types, which the root takes
		}
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
	for p, chain := range forbiddenDeps(t, bad, root) {
		t.Errorf("the root package depends on %s: %s; the node API belongs to package nodeserver", p, strings.Join(chain, " -> "))
	}
}
