package volume_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/hostpath"
)

// BenchmarkPodLifecycle measures one pod's volume life on the real
// filesystem: WaitForPodVolumes (pod directories, an emptyDir on disk, a
// hostPath directory checked against an allow-list), ContainerMounts, and
// ReleasePod (teardown, mount table check, removal).
func BenchmarkPodLifecycle(b *testing.B) {
	root, host := b.TempDir(), b.TempDir()
	if err := os.Mkdir(filepath.Join(host, "data"), 0o755); err != nil {
		b.Fatal(err)
	}
	hp, err := hostpath.New(hostpath.Options{AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: host}}})
	if err != nil {
		b.Fatal(err)
	}
	m, err := volume.NewManager(root, volume.Options{Plugins: []volume.Plugin{hp, emptydir.New(emptydir.Options{})}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := range b.N {
		pod := newPod(types.UID(fmt.Sprintf("uid-%d", i)),
			emptyVol("scratch", ""),
			hostVol("data", filepath.Join(host, "data"), v1.HostPathDirectory),
		)
		mounts, err := m.WaitForPodVolumes(b.Context(), pod)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.ContainerMounts(pod, &pod.Spec.Containers[0], mounts, nil); err != nil {
			b.Fatal(err)
		}
		if err := m.ReleasePod(b.Context(), pod.UID); err != nil {
			b.Fatal(err)
		}
	}
}
