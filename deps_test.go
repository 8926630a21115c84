package nodekit_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// TestDeps keeps nodekit importable: no package of the module (tests
// aside) may depend on the Kubernetes main module or on process-wide feature gates,
// or log through klog itself.
// kubernetesModule is the Kubernetes main module's path, spelled so that
// text searches for imports of it do not find this file.
var kubernetesModule = path.Join("k8s.io", "kubernetes")

func TestDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Module", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	badDeps := map[string]string{
		kubernetesModule:                               "the Kubernetes main module is not supported as a library",
		"k8s.io/component-base/featuregate":            "feature gates are process-wide state; use Options fields",
		"k8s.io/component-base/metrics/legacyregistry": "the default metrics registry is process-wide state",
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Module     *struct{ Path string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for bad, why := range badDeps {
			if p.ImportPath == bad || strings.HasPrefix(p.ImportPath, bad+"/") {
				t.Errorf("dependency %s: %s", p.ImportPath, why)
			}
		}
		if p.Module != nil && p.Module.Path == "github.com/nodekit/nodekit" {
			for _, imp := range p.Imports {
				if imp == "k8s.io/klog/v2" {
					t.Errorf("%s imports klog: take a logr.Logger in Options instead", p.ImportPath)
				}
			}
		}
	}
}
