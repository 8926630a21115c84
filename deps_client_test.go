package nodekit_test

import (
	"strings"
	"testing"
)

// TestClientDeps keeps client-go's full clientset, its scheme of every
// built-in API group and its informers out of the agent and of the minimal
// agent: their init registers the 56 API group versions of k8s.io/api,
// about 10 MiB of an idle agent's memory (see package kubeclient).
// clientset.From and tests may use them.
func TestClientDeps(t *testing.T) {
	bad := func(p string) bool {
		return p == "k8s.io/client-go/kubernetes" || strings.HasPrefix(p, "k8s.io/client-go/kubernetes/") ||
			p == "k8s.io/client-go/informers" || strings.HasPrefix(p, "k8s.io/client-go/informers/")
	}
	for p, chain := range forbiddenDeps(t, bad, "github.com/nodekit/nodekit", "github.com/nodekit/nodekit/examples/minimal-agent") {
		t.Errorf("%s depends on %s: %s; use package kubeclient", chain[0], p, strings.Join(chain, " -> "))
	}
}
