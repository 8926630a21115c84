package nodekit_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// forbiddenDeps reports, for each of roots, every package bad(p) holds
// for that it depends on, with the import chain that leads there: roots
// first, as go list names them. It skips the test without the go command.
func forbiddenDeps(t *testing.T, bad func(p string) bool, roots ...string) map[string][]string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
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
	found := map[string][]string{}
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
				found[p] = chain
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
	return found
}
