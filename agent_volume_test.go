package nodekit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/volume"
)

// TestAgentVolumes: an emptyDir shared by two containers and an allowed
// hostPath become mounts of the containers; a pod asking for a host path
// outside the allow-list is not started and its status says why, while the
// other pods run; once the pods are gone their directories are gone and the
// host data is untouched.
func TestAgentVolumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		allowed := t.TempDir()
		if err := os.WriteFile(filepath.Join(allowed, "config"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		rootDir := t.TempDir()
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{
			RootDir: rootDir,
			Volumes: volume.Options{AllowedHostPaths: []volume.AllowedHostPath{{PathPrefix: allowed, ReadOnly: true}}},
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
		})

		good := testPod("good", v1.RestartPolicyAlways, nil, "sleep 3600", "sleep 3600")
		good.Spec.Volumes = []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "conf", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: allowed}}},
		}
		for i := range good.Spec.Containers {
			good.Spec.Containers[i].VolumeMounts = []v1.VolumeMount{
				{Name: "scratch", MountPath: "/scratch"},
				{Name: "conf", MountPath: "/conf", ReadOnly: true},
			}
		}
		bad := testPod("bad", v1.RestartPolicyAlways, nil, "sleep 3600")
		bad.Spec.Volumes = []v1.Volume{{Name: "secrets", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc"}}}}
		bad.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "secrets", MountPath: "/host-etc"}}
		src <- []*v1.Pod{good, bad}
		time.Sleep(5 * time.Second)
		synctest.Wait()

		if !h.running("default/good") {
			t.Fatal("the pod with allowed volumes is not running")
		}
		var scratch []string
		for _, c := range h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
			st, err := rt.ContainerStatus(t.Context(), c.Id, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range st.Status.Mounts {
				switch m.ContainerPath {
				case "/scratch":
					scratch = append(scratch, m.HostPath)
				case "/conf":
					if m.HostPath != allowed || !m.Readonly {
						t.Errorf("conf mount = %s (read-only %v), want %s read-only", m.HostPath, m.Readonly, allowed)
					}
				}
			}
		}
		if len(scratch) != 2 || scratch[0] != scratch[1] || !strings.HasPrefix(scratch[0], rootDir) {
			t.Errorf("emptyDir host paths = %v, want one directory under %s shared by both containers", scratch, rootDir)
		}

		s, _ := h.status("default/bad")
		if s.Phase != v1.PodPending || s.Reason != "FailedMount" || !strings.Contains(s.Message, "/etc") || !strings.Contains(s.Message, "outside the allowed host paths") {
			t.Errorf("status of the pod with a forbidden host path = %s/%s %q, want Pending/FailedMount naming /etc", s.Phase, s.Reason, s.Message)
		}
		if !h.logs.contains("Unable to attach or mount volumes", "default/bad") {
			t.Error("no error log names the pod with a forbidden host path")
		}
		for _, c := range h.containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
			if c.Labels["io.kubernetes.pod.name"] == "bad" {
				t.Error("the pod with a forbidden host path has a running container")
			}
		}

		src <- []*v1.Pod{}
		time.Sleep(time.Minute)
		synctest.Wait()
		if _, err := os.Stat(scratch[0]); !os.IsNotExist(err) {
			t.Errorf("emptyDir %s still there after the pod went (err %v)", scratch[0], err)
		}
		pods, _ := os.ReadDir(filepath.Join(rootDir, "pods"))
		if len(pods) != 0 {
			t.Errorf("pod directories left: %v", pods)
		}
		if b, err := os.ReadFile(filepath.Join(allowed, "config")); err != nil || string(b) != "x" {
			t.Errorf("host data changed: %q, %v", b, err)
		}
	})
}
