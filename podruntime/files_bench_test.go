package podruntime

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkContainerFiles is the file system work of a new pod's
// container start: the termination-log file (and the pod's directories)
// and the managed /etc/hosts, as the volume manager left the pod's
// directory.
func BenchmarkContainerFiles(b *testing.B) {
	root := b.TempDir()
	if err := os.Mkdir(filepath.Join(root, "pods"), 0o750); err != nil {
		b.Fatal(err)
	}
	m := &Manager{opts: Options{RootDir: root}}
	c := &v1.Container{Name: "c", TerminationMessagePath: "/dev/termination-log"}
	ips := []string{"10.0.0.1"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("uid-" + strconv.Itoa(i))}}
		if err := os.Mkdir(filepath.Join(root, "pods", string(pod.UID)), 0o750); err != nil {
			b.Fatal(err)
		}
		if m.terminationMessageMount(pod, c) == nil {
			b.Fatal("no termination-log mount")
		}
		if hm, err := m.hostsMount(pod, c, ips); err != nil || hm == nil {
			b.Fatalf("hosts mount %v, %v", hm, err)
		}
	}
}
