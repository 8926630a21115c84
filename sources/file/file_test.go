package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/sourcestest"
)

// Tests run against the real filesystem and the real fsnotify, whose
// goroutines live outside any synctest bubble: they use real time, short
// periods and deadlines.

const (
	node = "node-1"
	// wait is the deadline for something expected to happen.
	wait = 5 * time.Second
	// quiet is how long nothing must happen.
	quiet = 300 * time.Millisecond
	// noPeriod makes the watch the only trigger of a re-list.
	noPeriod = time.Hour
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

func podYAML(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

func podJSON(name, image string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":%q}]}}`, name, image)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	// Write to a temporary dotfile and rename, as editors and config
	// management do, so that no list sees a half-written file.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// logLines records what a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 4})
}

// waitFor waits until a line contains every one of subs.
func (l *logLines) waitFor(t *testing.T, subs ...string) {
	t.Helper()
	l.waitForWithin(t, wait, subs...)
}

// waitForWithin waits up to d until a line contains every one of subs.
func (l *logLines) waitForWithin(t *testing.T, d time.Duration, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(l.find(subs...)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in time", subs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// find returns the lines that contain every one of subs.
func (l *logLines) find(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

type harness struct {
	t     *testing.T
	snaps chan []*v1.Pod
	logs  *logLines
}

// start runs a Source for opts until the test ends.
func start(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, snaps: make(chan []*v1.Pod, 1000), logs: &logLines{}}
	opts.NodeName = node
	opts.Logger = h.logs.logger()
	src, err := New(opts)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, h.snaps) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

// summary is "name image" of each pod, and the UIDs.
func summary(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name+" "+p.Spec.Containers[0].Image)
	}
	return out
}

// next returns the next snapshot.
func (h *harness) next() []*v1.Pod {
	h.t.Helper()
	select {
	case pods := <-h.snaps:
		return pods
	case <-time.After(wait):
		h.t.Fatal("no snapshot in time")
		return nil
	}
}

// expect waits for a snapshot whose summary is want, skipping others, and
// returns it.
func (h *harness) expect(want ...string) []*v1.Pod {
	h.t.Helper()
	pods, _ := h.expectCount(want...)
	return pods
}

// expectCount is expect that also returns how many snapshots it read,
// the matching one included.
func (h *harness) expectCount(want ...string) ([]*v1.Pod, int) {
	h.t.Helper()
	n := 0
	if want == nil {
		want = []string{}
	}
	deadline := time.After(wait)
	var got []string
	for {
		select {
		case pods := <-h.snaps:
			n++
			got = summary(pods)
			if cmp.Equal(want, got) {
				return pods, n
			}
		case <-deadline:
			h.t.Fatalf("no snapshot %q in time; last was %q", want, got)
			return nil, n
		}
	}
}

// none checks that no snapshot comes for a while.
func (h *harness) none() {
	h.t.Helper()
	select {
	case pods := <-h.snaps:
		h.t.Errorf("unexpected snapshot %q", summary(pods))
	case <-time.After(quiet):
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantErr    string
		wantPeriod time.Duration
		wantPath   string
	}{
		{name: "defaults", opts: Options{Path: "/etc/m/", NodeName: node}, wantPeriod: 20 * time.Second, wantPath: "/etc/m"},
		{name: "period kept", opts: Options{Path: "/m", NodeName: node, Period: time.Second}, wantPeriod: time.Second, wantPath: "/m"},
		{name: "no path", opts: Options{NodeName: node}, wantErr: "file: Path is required"},
		{name: "node name from the agent", opts: Options{Path: "/m"}, wantPeriod: 20 * time.Second, wantPath: "/m"},
		{name: "negative period", opts: Options{Path: "/m", NodeName: node, Period: -1}, wantErr: "file: negative Period -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("New() = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			if s.opts.Period != tt.wantPeriod || s.opts.Path != tt.wantPath {
				t.Errorf("Period, Path = %v, %q; want %v, %q", s.opts.Period, s.opts.Path, tt.wantPeriod, tt.wantPath)
			}
		})
	}
}

func TestDirectory(t *testing.T) {
	dir := t.TempDir()
	h := start(t, Options{Path: dir, Period: noPeriod})
	h.expect()

	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
	first := h.expect("a-node-1 nginx:1")[0]

	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:2"))
	edited := h.expect("a-node-1 nginx:2")[0]
	if edited.UID == first.UID {
		t.Errorf("edit kept UID %q, want a new one", first.UID)
	}
	if edited.Annotations["kubernetes.io/config.hash"] != string(edited.UID) {
		t.Errorf("config.hash = %q, want the UID %q", edited.Annotations["kubernetes.io/config.hash"], edited.UID)
	}

	write(t, filepath.Join(dir, "b.json"), podJSON("b", "redis:7"))
	h.expect("a-node-1 nginx:2", "b-node-1 redis:7")

	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	h.expect("b-node-1 redis:7")
}

func TestDirectoryPodDefaults(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
	h := start(t, Options{Path: dir, Period: noPeriod})
	p := h.expect("a-node-1 nginx:1")[0]
	if p.Namespace != "default" || p.Spec.NodeName != node || p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Status.Phase != v1.PodPending {
		t.Errorf("pod not defaulted as a static pod: namespace %q, nodeName %q, restartPolicy %q, phase %q",
			p.Namespace, p.Spec.NodeName, p.Spec.RestartPolicy, p.Status.Phase)
	}

	// The same manifest read by a second source gets the same UID.
	h2 := start(t, Options{Path: dir, Period: noPeriod})
	if p2 := h2.expect("a-node-1 nginx:1")[0]; p2.UID != p.UID {
		t.Errorf("UID differs between two reads of one manifest: %q, %q", p.UID, p2.UID)
	}
}

func TestSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	write(t, path, podYAML("a", "nginx:1"))
	write(t, filepath.Join(dir, "other.yaml"), podYAML("other", "nginx:1"))
	h := start(t, Options{Path: path, Period: noPeriod})
	first := h.expect("a-node-1 nginx:1")[0]

	// Other files in the directory are not watched.
	write(t, filepath.Join(dir, "other.yaml"), podYAML("other", "nginx:2"))
	h.none()

	write(t, path, podYAML("a", "nginx:2"))
	if edited := h.expect("a-node-1 nginx:2")[0]; edited.UID == first.UID {
		t.Errorf("edit kept UID %q, want a new one", first.UID)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.expect()

	write(t, path, podYAML("a", "nginx:3"))
	h.expect("a-node-1 nginx:3")
}

func TestBadManifests(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		wantErr string
	}{
		{name: "unparsable", file: "bad.yaml", content: "metadata: {name: x\n", wantErr: "not YAML or JSON"},
		{name: "pod list", file: "list.json", content: `{"kind":"PodList","apiVersion":"v1","items":[]}`, wantErr: "file holds a PodList, not a Pod"},
		{name: "second document bad too", file: "two.yaml", content: "metadata: {name: x\n---\n" + podYAML("y", "i:1"), wantErr: "not YAML or JSON"},
		{name: "no containers", file: "empty.yaml", content: "kind: Pod\nmetadata:\n  name: x\n", wantErr: "spec.containers: Required value"},
		{name: "other kind", file: "svc.yaml", content: "kind: Service\napiVersion: v1\n", wantErr: `kind \"Service\" is not Pod`},
		{name: "empty file", file: "nothing.yaml", content: "", wantErr: "no object"},
		{name: "hostUsers false with hostNetwork", file: "userns.yaml",
			content: "kind: Pod\nmetadata:\n  name: x\nspec:\n  hostUsers: false\n  hostNetwork: true\n  containers: [{name: c, image: 'nginx:1'}]\n",
			wantErr: "spec.hostNetwork: Forbidden: when `hostUsers` is false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "good.yaml"), podYAML("good", "nginx:1"))
			bad := filepath.Join(dir, tt.file)
			write(t, bad, tt.content)
			h := start(t, Options{Path: dir, Period: 20 * time.Millisecond})
			if got := summary(h.next()); !cmp.Equal(got, []string{"good-node-1 nginx:1"}) {
				t.Errorf("first snapshot = %q, want the good pod alone", got)
			}
			// Several periods pass; the error is logged once.
			time.Sleep(quiet)
			lines := h.logs.find(`"msg"="bad manifest"`, `"file"="`+bad+`"`, tt.wantErr)
			if len(lines) != 1 {
				t.Errorf("log lines naming %s and %q = %q, want one", bad, tt.wantErr, lines)
			}
		})
	}
}

// TestMultiDocumentManifest: a file of several YAML documents gives the
// pod of its first, as the kubelet reads it, and each later document is
// reported as ignored, with the reason, once.
func TestMultiDocumentManifest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "three.yaml")
	write(t, path, "---\n"+podYAML("x", "i:1")+"---\n"+podYAML("y", "i:1")+"---\n# nothing\n---\n"+podYAML("z", "i:1"))
	h := start(t, Options{Path: dir, Period: 20 * time.Millisecond})
	h.expect("x-node-1 i:1")
	time.Sleep(quiet)
	for _, doc := range []string{"document 2 of 3", "document 3 of 3"} {
		lines := h.logs.find(`"msg"="manifest document ignored"`, `"file"="`+path+`"`, doc, "a manifest file gives one pod, from its first document")
		if len(lines) != 1 {
			t.Errorf("log lines for %s = %q, want one", doc, lines)
		}
	}
	if lines := h.logs.find("document 4"); len(lines) != 0 {
		t.Errorf("an empty document was reported: %q", lines)
	}
}

func TestBrokenFileKeepsLastGoodPod(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, podYAML("a", "nginx:1"))
	h := start(t, Options{Path: dir, Period: 20 * time.Millisecond})
	good := h.expect("a-node-1 nginx:1")[0]

	write(t, path, "this: [is not a pod")
	h.none()
	if n := len(h.logs.find(`"msg"="bad manifest, keeping its last good pod"`, path)); n != 1 {
		t.Errorf("error logged %d times over several periods, want once", n)
	}

	write(t, path, "still: [not a pod")
	h.none()
	if n := len(h.logs.find(`"msg"="bad manifest, keeping its last good pod"`, path)); n != 2 {
		t.Errorf("error logged %d times after a second bad content, want twice", n)
	}

	write(t, path, podYAML("a", "nginx:2"))
	if fixed := h.expect("a-node-1 nginx:2")[0]; fixed.UID == good.UID {
		t.Errorf("fixed manifest kept UID %q", good.UID)
	}

	write(t, path, "broken again: [")
	h.none()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.expect()
}

func TestMissingDirectoryThenCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	h := start(t, Options{Path: dir, Period: noPeriod})
	h.expect()
	// The parent is watched.
	h.logs.waitFor(t, `"msg"="watching"`, `"target"="`+filepath.Dir(dir)+`"`)
	if n := len(h.logs.find("manifest path does not exist")); n != 1 {
		t.Errorf("missing path logged %d times, want once", n)
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
	h.expect("a-node-1 nginx:1")

	// The directory is now watched itself.
	write(t, filepath.Join(dir, "b.yaml"), podYAML("b", "nginx:1"))
	h.expect("a-node-1 nginx:1", "b-node-1 nginx:1")

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h.expect()
}

func TestPeriodicRelistWhileWatchFails(t *testing.T) {
	// The parent of the path does not exist: the watch fails and backs off
	// (1s, 2s, 4s, 8s); the periodic list (20ms) finds the directory first.
	// Waiting for the 8s back-off leaves a loaded machine room to tell the
	// two apart.
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	h := start(t, Options{Path: dir, Period: 20 * time.Millisecond})
	h.expect()
	h.logs.waitFor(t, `"msg"="watch failed, retrying"`, filepath.Join(root, "a"))
	h.logs.waitForWithin(t, 7*time.Second+wait, `"msg"="watch failed again, retrying"`, `"retryIn"="8s"`)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
	h.expect("a-node-1 nginx:1")
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("periodic list took %v, want well under the watch's 8s back-off", took)
	}
}

func TestDotfilesAndSubdirectoriesIgnored(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".hidden.yaml"), podYAML("hidden", "nginx:1"))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub", "nested.yaml"), podYAML("nested", "nginx:1"))
	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
	h := start(t, Options{Path: dir, Period: 20 * time.Millisecond})
	if got := summary(h.next()); !cmp.Equal(got, []string{"a-node-1 nginx:1"}) {
		t.Errorf("first snapshot = %q, want a alone", got)
	}
	write(t, filepath.Join(dir, ".hidden.yaml"), podYAML("hidden", "nginx:2"))
	h.none()
}

func TestBurstsCoalesce(t *testing.T) {
	dir := t.TempDir()
	h := start(t, Options{Path: dir, Period: noPeriod})
	h.expect()

	// Thirty new files, about ninety events.
	const n = 30
	var want []string
	for i := range n {
		name := fmt.Sprintf("p%02d", i)
		write(t, filepath.Join(dir, name+".yaml"), podYAML(name, "nginx:1"))
		want = append(want, name+"-node-1 nginx:1")
	}
	if _, count := h.expectCount(want...); count > 3 {
		t.Errorf("%d snapshots for one burst of writes, want at most 3", count)
	}
	h.none()

	// Twenty rewrites of one file in place.
	path := filepath.Join(dir, "p00.yaml")
	for i := range 20 {
		if err := os.WriteFile(path, []byte(podYAML("p00", fmt.Sprintf("nginx:%d", i))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want[0] = "p00-node-1 nginx:19"
	if _, count := h.expectCount(want...); count > 3 {
		t.Errorf("%d snapshots for one burst of rewrites, want at most 3", count)
	}
	h.none()
}

func TestUnchangedNotResentOnPeriod(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
	h := start(t, Options{Path: dir, Period: 10 * time.Millisecond})
	h.expect("a-node-1 nginx:1")
	h.none()
	// A change that does not change the pod (formatting) is not sent either.
	write(t, filepath.Join(dir, "a.yaml"), podJSON("a", "nginx:1"))
	h.none()
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		podYAML("a", "nginx:1"),
		podJSON("a", "nginx:1"),
		podYAML("a", "x") + "---\n" + podYAML("b", "y"),
		`{"kind":"PodList","items":[{"metadata":{"name":"a"}}]}`,
		"kind: Pod\nmetadata:\n  name: a\n  uid: fixed\nspec:\n  containers: [{name: c, image: i}]\n",
		"",
		"---\n",
		"[",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, ignored, err := decode(data, "/etc/manifests/x.yaml", node)
		for _, e := range ignored {
			if !strings.HasPrefix(e.Error(), "file: /etc/manifests/x.yaml: document ") {
				t.Errorf("decode() ignored document error %q does not name the file and document", e)
			}
		}
		if err != nil {
			if pod != nil {
				t.Errorf("decode() returned a pod and the error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "file: /etc/manifests/x.yaml: ") {
				t.Errorf("decode() error %q does not name the file", err)
			}
			return
		}
		if pod.UID == "" || !strings.HasSuffix(pod.Name, "-"+node) || pod.Spec.NodeName != node {
			t.Errorf("decoded pod not defaulted: %+v", pod.ObjectMeta)
		}
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol v1.Toleration) bool {
			return tol.Effect == v1.TaintEffectNoExecute && tol.Operator == v1.TolerationOpExists
		}) {
			t.Error("decoded pod lacks the NoExecute toleration")
		}
	})
}

func TestConformance(t *testing.T) {
	sourcestest.SourceSuite(t, func(t *testing.T) sources.Source {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1"))
		src, err := New(Options{Path: dir, NodeName: node, Period: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return src
	})
}

// TestSetNodeName: the node name comes from the agent (SetNodeName); one
// given in Options must be the agent's; a Source without one does not run.
func TestSetNodeName(t *testing.T) {
	s, err := New(Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(t.Context(), make(chan []*v1.Pod, 1)); err == nil || !strings.Contains(err.Error(), "no node name") {
		t.Fatalf("Run without a node name = %v, want an error", err)
	}
	if err := s.SetNodeName("n1"); err != nil || s.opts.NodeName != "n1" {
		t.Fatalf("SetNodeName = %v, NodeName %q", err, s.opts.NodeName)
	}
	other, _ := New(Options{Path: "/m", NodeName: "n2"})
	if err := other.SetNodeName("n1"); err == nil || !strings.Contains(err.Error(), `"n2" is not the agent's node name "n1"`) {
		t.Fatalf("SetNodeName over another node's name = %v", err)
	}
	if err := other.SetNodeName("n2"); err != nil {
		t.Fatalf("SetNodeName with the same name = %v", err)
	}
}
