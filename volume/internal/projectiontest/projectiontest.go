// Package projectiontest helps test the plugins that project API data
// into volumes: requests laid out as the volume manager lays them out, and
// what a container would read from a volume.
package projectiontest

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/atomicwriter"
)

// Pod is a pod in namespace "default" with one container mounting vols.
func Pod(name string, vols ...v1.Volume) *v1.Pod {
	c := v1.Container{Name: "app", Image: "busybox"}
	for _, v := range vols {
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, Volumes: vols},
	}
}

// Request lays out the directory of vol of pod for plugin under a
// temporary root, as the volume manager does, and returns the request.
func Request(t *testing.T, plugin string, pod *v1.Pod, vol *v1.Volume) volume.SetUpRequest {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := volume.PodDirs{Root: root}.Volume(pod.UID, plugin, vol.Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	return volume.SetUpRequest{Pod: pod, Volume: vol, Dir: dir}
}

// TearDownRequest is the teardown of what req set up.
func TearDownRequest(req volume.SetUpRequest) volume.TearDownRequest {
	return volume.TearDownRequest{PodUID: req.Pod.UID, Name: req.Volume.Name, Dir: req.Dir}
}

// Files returns what a container reads in dir: every file reached through
// the visible names, as "content mode" by path.
func Files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		root := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(root); err == nil && fi.IsDir() {
			root += "/"
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Stat(p)
			if err != nil || fi.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, filepath.Clean(p))
			out[rel] = fmt.Sprintf("%s %#o", b, uint32(fi.Mode().Perm()))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// DataDir returns the timestamped directory ..data points at in dir, ""
// when there is none.
func DataDir(t *testing.T, dir string) string {
	t.Helper()
	cur, err := atomicwriter.Current(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// MountType returns the type of the file system mounted on dir, "" when
// none is.
func MountType(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no mount table: %v", err)
	}
	defer f.Close()
	typ := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == dir {
			for i, x := range fields {
				if x == "-" && i+1 < len(fields) {
					typ = fields[i+1]
				}
			}
		}
	}
	return typ
}

// RequireRoot skips the test unless it runs as root.
func RequireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs or change owners (CI runs as root)")
	}
}
