package e2e

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/logrotate"
)

// TestLogRotation: a container writing fast on containerd has its log
// rotated at the size limit (64Ki here) through CRI ReopenContainerLog:
// the rotated files are gzip-compressed CRI log lines, at most MaxFiles
// (3) files remain, and the container keeps writing to its new log.
func TestLogRotation(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agentWith(nil, "log rotation", func(o *nodekit.Options) {
		o.NodeResources.LogRotation.Options = logrotate.Options{
			MaxSize:  resource.MustParse("64Ki"),
			MaxFiles: 3,
			Period:   time.Second,
		}
	})
	f.write(podSpec{name: "chatty", script: `trap "exit 0" TERM; i=0; while true; do echo "line $i of a container that writes a lot to its log"; i=$((i+1)); if [ $((i % 500)) = 0 ]; then sleep 0.2 & wait; fi; done`})
	pod := f.pod("chatty")
	eventually(t, 30*time.Second, pod+" Running", func() bool { return a.running(pod) })
	dir := filepath.Join(f.logsDir, strings.ReplaceAll(pod, "/", "_")+"_"+string(a.podUID(pod)), "main")
	var names []string
	took := eventually(t, 60*time.Second, "two compressed rotated logs", func() bool {
		entries, _ := os.ReadDir(dir)
		names = names[:0]
		gz := 0
		for _, e := range entries {
			names = append(names, e.Name())
			if strings.HasSuffix(e.Name(), ".gz") {
				gz++
			}
		}
		return gz >= 1 && len(names) == 3
	})
	t.Logf("running → %v after %s", names, took.Round(time.Millisecond))
	time.Sleep(3 * time.Second) // a few more rotations
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 3 {
		t.Errorf("%d files in %s, want at most MaxFiles 3", len(entries), dir)
	}
	// The rotator deletes the oldest compressed log about every second:
	// a file listed may be gone when opened. Each one still there must
	// hold CRI log lines, and at least one must be read.
	read := 0
	eventually(t, 30*time.Second, "a compressed rotated log read", func() bool {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".gz") {
				continue
			}
			fh, err := os.Open(filepath.Join(dir, e.Name()))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(fh)
			if err != nil {
				fh.Close()
				t.Fatalf("%s: %v", e.Name(), err)
			}
			b, err := io.ReadAll(zr)
			fh.Close()
			if err != nil || !strings.Contains(string(b), " stdout F line ") {
				t.Errorf("%s: %d bytes, %v; want CRI log lines", e.Name(), len(b), err)
			}
			read++
		}
		return read > 0
	})
	// The container writes on, to its reopened log.
	cur := filepath.Join(dir, "0.log")
	st1, err := os.Stat(cur)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the current log to change", func() bool {
		st2, err := os.Stat(cur)
		return err == nil && (st2.Size() != st1.Size() || !os.SameFile(st1, st2))
	})
	if !a.running(pod) {
		t.Errorf("%s not running", pod)
	}
}
