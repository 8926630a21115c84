package nodekit_test

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentPodDirectoryAfterTermination: an update of a pod that has
// already terminated (as the API server sends after the agent's final
// grace-0 delete) does not bring its directory back, and once the pod is
// removed no pod directory is left, as the kubelet, whose volume manager
// does not (re)add the volumes of a pod whose termination was requested.
func TestAgentPodDirectoryAfterTermination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rootDir := t.TempDir()
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{
			RootDir: rootDir,
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
		})
		pod := testPod("web", v1.RestartPolicyAlways, nil, "sleep 3600")
		src <- []*v1.Pod{pod}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !h.running("default/web") {
			t.Fatal("the pod is not running")
		}
		podDir := filepath.Join(rootDir, "pods", string(pod.UID))
		if _, err := os.Stat(podDir); err != nil {
			t.Fatalf("the running pod's directory: %v", err)
		}

		deleting := pod.DeepCopy()
		now := metav1.Now()
		deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, ptr(int64(5))
		src <- []*v1.Pod{deleting}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if _, err := os.Stat(podDir); !os.IsNotExist(err) {
			t.Fatalf("the terminated pod's directory is still there (err %v)", err)
		}

		// The final delete's update, after the pod terminated.
		final := deleting.DeepCopy()
		final.DeletionGracePeriodSeconds = ptr(int64(0))
		final.ResourceVersion = "2"
		src <- []*v1.Pod{final}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if _, err := os.Stat(podDir); !os.IsNotExist(err) {
			t.Errorf("an update of the terminated pod made its directory again (err %v)", err)
		}

		src <- []*v1.Pod{}
		time.Sleep(time.Minute)
		synctest.Wait()
		if pods, _ := os.ReadDir(filepath.Join(rootDir, "pods")); len(pods) != 0 {
			t.Errorf("pod directories left after the pod was removed: %v", pods)
		}
	})
}
