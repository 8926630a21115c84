package e2e

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/gc"
)

// pauseImage is the sandbox image hack/containerd.sh imports. containerd
// 1.6 does not report it pinned, so the agent is told to keep it.
const pauseImage = "registry.k8s.io/pause:3.10"

// TestImageGC: with the image file system reported above the high
// threshold, the agent's image collector removes the images no container
// uses (the web image) and keeps the one a running pod uses (busybox) and
// the pinned sandbox image; the pod keeps running.
func TestImageGC(t *testing.T) {
	in := startInstance(t, "1.6")
	f := newFixtureAt(t, in.endpoint)
	a := f.agentWith(nil, "image gc", func(o *nodekit.Options) {
		o.NodeResources.GC.DisableImages = false // the agents of the other tests run without it
		o.NodeResources.GC.Images = gc.ImageOptions{
			Period: 2 * time.Second,
			Policy: gc.ImagePolicy{MinAge: time.Second},
			Pinned: []string{pauseImage},
			// 90% full, whatever is removed: everything eligible goes.
			FsStats: func(context.Context) (gc.FsStats, error) {
				return gc.FsStats{Capacity: 100 << 30, Available: 10 << 30}, nil
			},
		}
	})
	f.write(podSpec{name: "user", script: sleepScript})
	pod := f.pod("user")
	eventually(t, 30*time.Second, pod+" Running", func() bool { return a.running(pod) })

	has := func(ref string) bool {
		st, err := f.cri.ImageStatus(t.Context(), &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil {
			t.Fatalf("ImageStatus %s: %v", ref, err)
		}
		return st.GetImage() != nil
	}
	if !has(webImage) {
		t.Fatalf("%s is not in the store to begin with", webImage)
	}
	took := eventually(t, 30*time.Second, webImage+" removed", func() bool { return !has(webImage) })
	t.Logf("unused %s removed %s after the pod ran", webImage, took.Round(time.Millisecond))
	// Two more collections: what stays, stays.
	time.Sleep(5 * time.Second)
	for _, ref := range []string{busyboxImage, pauseImage} {
		if !has(ref) {
			t.Errorf("%s was removed; it is in use or pinned", ref)
		}
	}
	if !a.running(pod) {
		t.Errorf("%s no longer running", pod)
	}
	if n := a.logs.count("Removed image", "nodekit.test/web"); n != 1 {
		t.Errorf("%d log lines say the web image was removed, want 1", n)
	}
	if a.logs.count("Failed to garbage collect required amount of images") == 0 {
		t.Errorf("no log line says the collector could not free enough")
	}
}
