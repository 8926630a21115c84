package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// crashOnSandbox crashes containerd in the middle of the first
// RunPodSandbox: once the sandbox is made (its network set up, an IP
// reserved) its pause process is killed and the containerd daemon with
// it, and the caller gets an Unavailable error, as when containerd dies
// before it answers.
type crashOnSandbox struct {
	runtime.RuntimeService
	script, name string

	mu       sync.Mutex
	done     bool
	halfMade string
	crashErr error
}

func (c *crashOnSandbox) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	c.mu.Lock()
	first := !c.done
	c.done = true
	c.mu.Unlock()
	if !first {
		return c.RuntimeService.RunPodSandbox(ctx, config, handler)
	}
	id, err := c.RuntimeService.RunPodSandbox(ctx, config, handler)
	if err != nil {
		return "", err
	}
	crashErr := c.crash(ctx, id)
	c.mu.Lock()
	c.halfMade, c.crashErr = id, crashErr
	c.mu.Unlock()
	return "", status.Error(codes.Unavailable, "error reading from server: EOF")
}

func (c *crashOnSandbox) crash(ctx context.Context, id string) error {
	st, err := c.RuntimeService.PodSandboxStatus(ctx, id, true)
	if err != nil {
		return fmt.Errorf("sandbox status: %w", err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		return fmt.Errorf("no pause pid in the sandbox's info (%v)", err)
	}
	if err := syscall.Kill(info.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill pause %d: %w", info.Pid, err)
	}
	if out, err := exec.Command(c.script, "kill", "--name", c.name).CombinedOutput(); err != nil {
		return fmt.Errorf("hack/containerd.sh kill: %v: %s", err, out)
	}
	return nil
}

func (c *crashOnSandbox) state() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.halfMade, c.crashErr
}

// ipReservations counts the host-local IPAM reservations of the
// instance's pod network (one file per reserved address).
func ipReservations(t *testing.T, in *instance) int {
	t.Helper()
	base := os.Getenv("NODEKIT_CONTAINERD_STATE")
	if base == "" {
		base = "/tmp/nodekit-containerd"
	}
	dir := filepath.Join(base, in.name, "cni", "ipam", "nodekit-"+in.name)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			n++
		}
	}
	return n
}

// TestSandboxLeakedByContainerdCrash: containerd dies while a
// RunPodSandbox is in flight, after the sandbox got its network and IP.
// Once containerd is back the agent runs the pod in a new sandbox, and
// the half-made one is stopped (its IP released) and removed within
// seconds, well before the collector's one-minute period: one sandbox and
// one IP reservation remain.
func TestSandboxLeakedByContainerdCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills containerd")
	}
	in := startInstance(t, "1.6")
	f := newFixtureAt(t, in.endpoint)
	rs := &crashOnSandbox{RuntimeService: f.cri, script: in.script, name: in.name}
	a := f.agent(rs, "containerd crash during RunPodSandbox")
	f.write(podSpec{name: "leak", script: sleepScript})
	pod := f.pod("leak")

	var halfMade string
	eventually(t, 30*time.Second, "containerd to crash during RunPodSandbox", func() bool {
		id, err := rs.state()
		if err != nil {
			t.Fatalf("crashing containerd: %v", err)
		}
		halfMade = id
		return id != ""
	})
	time.Sleep(3 * time.Second) // containerd stays down for a while
	in.run("start", "--version", "1.6", "--name", in.name)
	up := time.Now()

	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	t.Logf("containerd back → %s Running after %s", pod, time.Since(up).Round(time.Millisecond))
	uid := a.podUID(pod)
	eventually(t, 45*time.Second, "the half-made sandbox removed", func() bool {
		sbs, _ := podObjects(t, f.cri, uid)
		for _, s := range sbs {
			if s.Id == halfMade {
				return false
			}
		}
		return len(sbs) == 1
	})
	t.Logf("containerd back → half-made sandbox %.12s removed after %s", halfMade, time.Since(up).Round(time.Millisecond))
	sbs, _ := podObjects(t, f.cri, uid)
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("sandboxes %v, want one ready", sbs)
	}
	if n := ipReservations(t, in); n != 1 {
		t.Errorf("%d IP reservations in the pod network, want 1 (the half-made sandbox's released)", n)
	}
	if !a.running(pod) {
		t.Errorf("%s not running", pod)
	}
}
