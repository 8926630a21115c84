package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// sandboxHook is the soak's runtime: it tells the test when the agent
// issues a RunPodSandbox, so that the test can kill containerd while the
// call is in flight, and how the call ended.
type sandboxHook struct {
	runtime.RuntimeService

	mu     sync.Mutex
	issued chan<- string   // armed: the next call's pod UID goes here
	ended  chan<- error    // and then its result
	took   []time.Duration // of the calls not armed that succeeded
}

// shortest returns the shortest time a RunPodSandbox took, or fallback
// when none was measured: a kill that long after the call is issued finds
// it in flight.
func (h *sandboxHook) shortest(fallback time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.took) == 0 {
		return fallback
	}
	return slices.Min(h.took)
}

// arm makes the next RunPodSandbox report itself on issued before it is
// sent to the runtime, and its result on ended once it returns.
func (h *sandboxHook) arm() (issued <-chan string, ended <-chan error) {
	i, e := make(chan string, 1), make(chan error, 1)
	h.mu.Lock()
	h.issued, h.ended = i, e
	h.mu.Unlock()
	return i, e
}

// disarm drops a hook that no call took.
func (h *sandboxHook) disarm() {
	h.mu.Lock()
	h.issued, h.ended = nil, nil
	h.mu.Unlock()
}

func (h *sandboxHook) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	h.mu.Lock()
	issued, ended := h.issued, h.ended
	h.issued, h.ended = nil, nil
	h.mu.Unlock()
	if issued == nil {
		start := time.Now()
		id, err := h.RuntimeService.RunPodSandbox(ctx, config, handler)
		if err == nil {
			h.mu.Lock()
			h.took = append(h.took, time.Since(start))
			h.mu.Unlock()
		}
		return id, err
	}
	issued <- config.GetMetadata().GetUid()
	id, err := h.RuntimeService.RunPodSandbox(ctx, config, handler)
	ended <- err
	return id, err
}

// stateDir is the instance's directory under hack/containerd.sh's base.
func (in *instance) stateDir() string {
	base := os.Getenv("NODEKIT_CONTAINERD_STATE")
	if base == "" {
		base = "/tmp/nodekit-containerd"
	}
	return filepath.Join(base, in.name)
}

// crash kills the containerd daemon with SIGKILL (its shims and
// containers live on) and waits until it is gone.
func (in *instance) crash() error {
	b, err := os.ReadFile(filepath.Join(in.stateDir(), "containerd.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("containerd.pid holds %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 containerd %d: %w", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd %d still there 30s after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// processAlive reports whether /proc holds pid, a zombie included:
// hack/containerd.sh start refuses to start while it does.
func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// ipOwners returns the host-local IPAM reservations of the instance's pod
// network: address → the sandbox (container) ID holding it.
func ipOwners(in *instance) (map[string]string, error) {
	dir := filepath.Join(in.stateDir(), "cni", "ipam", "nodekit-"+in.name)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if net.ParseIP(e.Name()) == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // released meanwhile
			}
			return nil, err
		}
		id, _, _ := strings.Cut(string(b), "\n")
		out[e.Name()] = strings.TrimSpace(id)
	}
	return out, nil
}

// mountsUnder returns the mount points below dir.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var points []string
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if p := unescape.Replace(fields[4]); strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	return points, nil
}

// diskFiller fills a small file system to ENOSPC, both its blocks and its
// inodes, and frees it again.
type diskFiller struct {
	dir string // a directory of the filler's own on the file system
}

// fill writes one file until the blocks run out, then makes empty files
// until the inodes do. It returns the bytes and files it took.
func (d diskFiller) fill() (int64, int, error) {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return 0, 0, err
	}
	fh, err := os.Create(filepath.Join(d.dir, "blocks"))
	if err != nil {
		return 0, 0, err
	}
	var written int64
	for _, size := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, size)
		for {
			n, err := fh.Write(buf)
			written += int64(n)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				fh.Close()
				return written, 0, err
			}
		}
	}
	if err := fh.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return written, 0, err
	}
	files := 0
	for ; ; files++ {
		fh, err := os.OpenFile(filepath.Join(d.dir, strconv.Itoa(files)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, syscall.ENOSPC) {
			return written, files, nil
		}
		if err != nil {
			return written, files, err
		}
		fh.Close()
	}
}

// free removes what fill made.
func (d diskFiller) free() error { return os.RemoveAll(d.dir) }
