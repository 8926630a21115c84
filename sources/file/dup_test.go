package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDuplicateNames: two files defining the same pod name give one pod
// (the first file's, in name order) and one error naming both files,
// logged once however often the directory is listed again, and again
// when the duplicate comes back after being resolved.
func TestDuplicateNames(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	write(t, a, podYAML("web", "nginx"))
	write(t, b, podYAML("web", "busybox"))
	logs := &logLines{}
	l := newLister(dir, node, logs.logger())
	dupLines := func() []string { return logs.find("duplicate static pod name", a, b) }
	for i := range 5 {
		pods, ok := l.list(t.Context())
		var web []string
		for _, p := range pods {
			if p.Name == "web-"+node {
				web = append(web, p.Spec.Containers[0].Image)
			}
		}
		if !ok || len(web) != 1 || web[0] != "nginx" {
			t.Fatalf("list %d: pods web with images %q, want a.yaml's alone (nginx)", i, web)
		}
		if i == 2 {
			// Another file changes: the duplicate is still there.
			write(t, filepath.Join(dir, "c.yaml"), podYAML("other", "busybox"))
		}
	}
	if got := dupLines(); len(got) != 1 {
		t.Errorf("duplicate errors after 5 lists: %q, want exactly one naming %s and %s", got, a, b)
	} else {
		t.Log(got[0])
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if pods, _ := l.list(t.Context()); len(pods) != 2 {
		t.Fatalf("after removing b.yaml: %d pods, want 2 (web and other)", len(pods))
	}
	write(t, b, podYAML("web", "busybox"))
	l.list(t.Context())
	l.list(t.Context())
	if got := dupLines(); len(got) != 2 {
		t.Errorf("duplicate errors after it came back: %d, want 2", len(got))
	}
}

// TestAPIValidation: a manifest the API server would refuse (a
// 165-character spec.hostname) gives no pod and an error naming the file
// and the field; the valid manifest beside it gives its pod.
func TestAPIValidation(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, podYAML("bad", "busybox")+"  hostname: "+strings.Repeat("h", 165)+"\n")
	write(t, filepath.Join(dir, "good.yaml"), podYAML("good", "busybox"))
	logs := &logLines{}
	l := newLister(dir, node, logs.logger())
	pods, ok := l.list(t.Context())
	if !ok || len(pods) != 1 || pods[0].Name != "good-"+node {
		t.Fatalf("list = %d pods, want good alone", len(pods))
	}
	if got := logs.find("bad manifest", bad, "spec.hostname: Invalid value", "must be no more than 63 characters"); len(got) != 1 {
		t.Errorf("log lines about bad.yaml: %q, want one naming the file and spec.hostname", logs.find(bad))
	}
}
