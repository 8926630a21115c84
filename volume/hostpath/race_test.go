package hostpath_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/hostpath"
)

// TestSymlinkSwapRace swaps a directory of an allowed host path for a
// symlink to a directory outside the allowed paths, over and over, while
// the volume is set up and torn down: every set-up volume must show the
// allowed directory, never the outside one. (The end-to-end form, with
// containerd doing the mount, is test/e2e's TestHostPathSwapRace.)
func TestSymlinkSwapRace(t *testing.T) {
	if !binds() {
		t.Skip("needs root to bind-mount (CI runs as root)")
	}
	root := hostDir(t)
	allowed := filepath.Join(root, "allowed")
	for path, content := range map[string]string{
		filepath.Join(allowed, "d", "marker"):   "inside",
		filepath.Join(root, "secret", "marker"): "outside",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := newPlugin(t, hostpath.Options{AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: allowed}}})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	swaps := 0
	wg.Go(func() {
		d, real := filepath.Join(allowed, "d"), filepath.Join(allowed, "d.real")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.Rename(d, real); err != nil {
				t.Error(err)
				return
			}
			if err := os.Symlink(filepath.Join(root, "secret"), d); err != nil {
				t.Error(err)
				return
			}
			if err := os.Remove(d); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(real, d); err != nil {
				t.Error(err)
				return
			}
			swaps++
		}
	})

	const attempts = 1000
	ok, refused := 0, 0
	vol := hostPathVolume("data", filepath.Join(allowed, "d"), v1.HostPathDirectory)
	dir := filepath.Join(t.TempDir(), "data")
	for range attempts {
		m, err := p.SetUp(t.Context(), volume.SetUpRequest{Pod: podMounting(vol, false), Volume: vol, Dir: dir})
		if err != nil {
			refused++
			continue
		}
		ok++
		got, err := os.ReadFile(filepath.Join(m.HostPath, "marker"))
		if err == nil && string(got) != "inside" {
			t.Errorf("attempt %d: the volume shows %q: it escaped the allowed paths", ok+refused, got)
		}
		if err := p.TearDown(t.Context(), volume.TearDownRequest{Name: "data", Dir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d attempts against %d swaps: %d set up, %d refused as changed or escaping", attempts, swaps, ok, refused)
	if t.Failed() {
		return
	}
	// Without the swaps it sets up.
	m, err := setUp(t, p, vol, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(m.HostPath, "marker")); err != nil || string(got) != "inside" {
		t.Errorf("after the race the volume shows %q, %v", got, err)
	}
}
