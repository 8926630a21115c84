package nodekit_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestClientDeps keeps client-go's full clientset, its scheme of every
// built-in API group and its informers out of the agent and of the minimal
// agent: their init registers the 56 API group versions of k8s.io/api,
// about 10 MiB of an idle agent's memory (see package kubeclient).
// clientset.From and tests may use them.
func TestClientDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	roots := []string{"github.com/nodekit/nodekit", "github.com/nodekit/nodekit/examples/minimal-agent"}
	out, err := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports"}, roots...)...).Output()
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
		return p == "k8s.io/client-go/kubernetes" || strings.HasPrefix(p, "k8s.io/client-go/kubernetes/") ||
			p == "k8s.io/client-go/informers" || strings.HasPrefix(p, "k8s.io/client-go/informers/")
	}
	for _, root := range roots {
		// Breadth first from root; via records the import each package
		// was reached from, to name the chain.
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
				t.Errorf("%s depends on %s: %s; use package kubeclient", root, p, strings.Join(chain, " -> "))
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
	}
}
