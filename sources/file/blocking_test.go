//go:build unix

package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestBlockingFilesSkipped: a FIFO without a writer, a symlink to a FIFO
// and a symlink to /proc/kmsg in the manifest directory are skipped, each
// with an error naming it, while the regular manifests beside them are
// read; a manifest added later is picked up, and Run stops when asked.
func TestBlockingFilesSkipped(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	write(t, filepath.Join(dir, "good.yaml"), podYAML("good", "busybox"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(other, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "pipe"), filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	blocking := []string{"fifo.yaml", "link.yaml"}
	if f, err := os.Open("/proc/kmsg"); err == nil {
		// Readable (root): its read blocks until the kernel logs, and
		// consumes what it reads.
		f.Close()
		if err := os.Symlink("/proc/kmsg", filepath.Join(dir, "kmsg.yaml")); err != nil {
			t.Fatal(err)
		}
		blocking = append(blocking, "kmsg.yaml")
	}
	h := start(t, Options{Path: dir, Period: noPeriod})
	h.expect("good-" + node + " busybox")
	for _, name := range blocking {
		h.logs.waitFor(t, filepath.Join(dir, name))
		lines := h.logs.find(filepath.Join(dir, name))
		t.Logf("%s: %s", name, lines[0])
		if !strings.Contains(lines[0], `"error"=`) || strings.Contains(lines[0], `"level"=`) {
			t.Errorf("%s: logged as %q, want an error", name, lines[0])
		}
	}
	write(t, filepath.Join(dir, "later.yaml"), podYAML("later", "nginx"))
	h.expect("good-"+node+" busybox", "later-"+node+" nginx")
}

// TestReadDeadline: a manifest whose read never returns is given up after
// ReadTimeout with an error naming it, the other files are listed, the
// file is not read again while the stuck read lasts, and a list blocked on
// it returns as soon as its context ends.
func TestReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "a.yaml"), podYAML("a", "busybox"))
		write(t, filepath.Join(dir, "hang.yaml"), podYAML("hang", "busybox"))
		logs := &logLines{}
		l := newLister(dir, node, logs.logger())
		l.timeout = 5 * time.Second
		release := make(chan struct{})
		defer close(release)
		var mu sync.Mutex
		reads := map[string]int{}
		count := func(name string) int {
			mu.Lock()
			defer mu.Unlock()
			return reads[name]
		}
		l.read = func(name string) ([]byte, error) {
			mu.Lock()
			reads[filepath.Base(name)]++
			mu.Unlock()
			if filepath.Base(name) == "hang.yaml" {
				<-release
			}
			return readManifest(name)
		}

		start := time.Now()
		pods, ok := l.list(t.Context())
		if !ok || len(pods) != 1 || pods[0].Name != "a-"+node {
			t.Fatalf("list = %d pods, %v; want pod a alone", len(pods), ok)
		}
		if took := time.Since(start); took != l.timeout {
			t.Errorf("list took %v, want the read timeout %v", took, l.timeout)
		}
		if got := logs.find("hang.yaml", "read did not finish within 5s"); len(got) != 1 {
			t.Errorf("log lines about the stuck read: %q, want one", got)
		}

		start = time.Now()
		if pods, ok := l.list(t.Context()); !ok || len(pods) != 1 {
			t.Fatalf("second list = %d pods, %v", len(pods), ok)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("second list took %v: it waited for the stuck file again", took)
		}
		if n := count("hang.yaml"); n != 1 {
			t.Errorf("hang.yaml read %d times while its first read was stuck, want 1", n)
		}

		// Once the read returns, the file is read again.
		release <- struct{}{}
		synctest.Wait()
		if pods, _ := l.list(t.Context()); len(pods) != 1 {
			t.Fatalf("list after release = %d pods", len(pods))
		}
		synctest.Wait()
		if n := count("hang.yaml"); n != 2 {
			t.Errorf("hang.yaml read %d times after the stuck read returned, want 2", n)
		}

		// Shutdown while a read hangs: list returns at once.
		l2 := newLister(dir, node, logs.logger())
		l2.read = l.read
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l2.list(ctx)
		}()
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Error("list did not return when its context ended")
		}
	})
}

// TestReadManifestChecksTheOpenedFile: readManifest, given a path that is
// a FIFO by the time it opens it (a regular file swapped after the
// directory listing's stat), returns at once with an error naming it.
func TestReadManifestChecksTheOpenedFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "swapped.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readManifest(fifo)
	if err == nil || !strings.Contains(err.Error(), fifo+" is a named pipe") {
		t.Errorf("readManifest(FIFO) = %v, want an error naming it a named pipe", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("readManifest(too big) = %v, want the size error", err)
	}
	small := filepath.Join(dir, "small.yaml")
	want := podYAML("small", "busybox")
	if err := os.WriteFile(small, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readManifest(small); err != nil || string(got) != want {
		t.Errorf("readManifest(small) = %q, %v; want its content", got, err)
	}
}
