package nodekit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/volume"
)

// TestAgentPodDirectoryFailure: when the pod directories cannot be created
// (here <root>/pods is a file; a full disk fails the same way), the pod's
// status says why within seconds (reason FailedToMakePodDataDirectories,
// the error in the message), a Warning event with that reason is recorded,
// and the agent logs it as an error; no sandbox is made. Once the cause is
// gone, the pod starts.
func TestAgentPodDirectoryFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rootDir := t.TempDir()
		pods := filepath.Join(rootDir, "pods")
		if err := os.WriteFile(pods, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		rec := record.NewFakeRecorder(1000)
		logs := &logBuffer{}
		src := make(chanSource, 1)
		h := startAgentWithLogs(t, rt, logs, nodekit.Options{
			RootDir: rootDir,
			Events:  rec,
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
		})
		src <- []*v1.Pod{testPod("web", v1.RestartPolicyAlways, nil, "sleep 3600")}
		time.Sleep(2 * time.Second)
		synctest.Wait()

		st, _ := h.status("default/web")
		if st.Reason != volume.ReasonFailedToMakePodDataDirectories || !strings.Contains(st.Message, pods) {
			t.Errorf("status reason %q message %q, want %s and a message naming %s", st.Reason, st.Message, volume.ReasonFailedToMakePodDataDirectories, pods)
		}
		var events []string
		for len(rec.Events) > 0 {
			events = append(events, <-rec.Events)
		}
		found := false
		for _, e := range events {
			found = found || strings.HasPrefix(e, "Warning FailedToMakePodDataDirectories error making pod data directories: ")
		}
		if !found {
			t.Errorf("events %q, want a Warning FailedToMakePodDataDirectories", events)
		}
		if !logs.contains("Creating pod directories failed", `"error"=`, "not a directory") {
			t.Error("the volume manager did not log the failure as an error")
		}
		if n := len(h.sandboxes()); n != 0 {
			t.Errorf("%d sandboxes, want none", n)
		}

		// The cause goes away: the pod starts.
		if err := os.Remove(pods); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if !h.running("default/web") {
			t.Error("the pod did not start once its directory could be created")
		}
	})
}
