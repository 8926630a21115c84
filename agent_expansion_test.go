package nodekit_test

import (
	sysruntime "runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentExpansionBomb feeds $(VAR) expansion bombs through env, command,
// subPathExpr and an exec probe: each container fails with a
// CreateContainerConfigError (the probe with a failure) whose message names
// the variable or the field, the agent and a plain pod beside them go on,
// and the heap stays small. The bombs reach 16 MiB (past the 1 MiB bound of
// one string), not the gigabytes of a real one, so that a build without the
// bounds fails this test rather than the machine.
func TestAgentExpansionBomb(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		rec := record.NewFakeRecorder(1000)
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{Events: rec, Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})

		bomb := []v1.EnvVar{
			{Name: "V0", Value: strings.Repeat("x", 1024)},
			{Name: "V1", Value: strings.Repeat("$(V0)", 1024)}, // 1 MiB, at the bound
		}
		envBomb := testPod("env-bomb", v1.RestartPolicyAlways, nil, "sleep 3600")
		envBomb.Spec.Containers[0].Env = append(bomb, v1.EnvVar{Name: "V2", Value: strings.Repeat("$(V1)", 16)})
		cmdBomb := testPod("cmd-bomb", v1.RestartPolicyAlways, nil, strings.Repeat("$(V1)", 16))
		cmdBomb.Spec.Containers[0].Env = bomb
		pathBomb := testPod("path-bomb", v1.RestartPolicyAlways, nil, "sleep 3600")
		pathBomb.Spec.Containers[0].Env = bomb
		pathBomb.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		pathBomb.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPathExpr: strings.Repeat("$(V1)", 16)}}
		probeBomb := testPod("probe-bomb", v1.RestartPolicyAlways, nil, "sleep 3600")
		probeBomb.Spec.Containers[0].Env = bomb[:1] // a probe expands plain values only
		probe := execProbe(2, 3)
		probe.Exec.Command = []string{"sh", "-c", strings.Repeat("$(V0)", 16<<10)}
		probeBomb.Spec.Containers[0].LivenessProbe = probe
		plain := testPod("plain", v1.RestartPolicyAlways, nil, "sleep 3600")
		src <- []*v1.Pod{envBomb, cmdBomb, pathBomb, probeBomb, plain}

		time.Sleep(30 * time.Second)
		synctest.Wait()

		for _, tc := range []struct{ pod, message string }{
			{"env-bomb", "env V2: too long: more than 1048576 bytes after $(VAR) expansion"},
			{"cmd-bomb", "command[2]: too long: more than 1048576 bytes after $(VAR) expansion"},
			{"path-bomb", "volume mount data: subPathExpr: too long: more than 4096 bytes after $(VAR) expansion"},
		} {
			s, _ := h.status("default/" + tc.pod)
			if len(s.ContainerStatuses) != 1 {
				t.Errorf("%s: container statuses %+v", tc.pod, s.ContainerStatuses)
				continue
			}
			w := s.ContainerStatuses[0].State.Waiting
			if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, tc.message) {
				t.Errorf("%s: state %+v, want waiting with CreateContainerConfigError naming %q", tc.pod, s.ContainerStatuses[0].State, tc.message)
			}
		}
		if !h.running("default/plain") {
			s, _ := h.status("default/plain")
			t.Errorf("plain pod not running beside the bombs: %+v", s)
		}
		s, _ := h.status("default/probe-bomb")
		if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].RestartCount == 0 {
			t.Errorf("probe-bomb: statuses %+v, want the container restarted by its failing liveness probe", s.ContainerStatuses)
		}

		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		for _, want := range []string{
			"Warning Failed Error: env V2: too long",
			"Warning Failed Error: command[2]: too long",
			"Warning Unhealthy Liveness probe failed: exec probe command[2]: too long: more than 1048576 bytes after $(VAR) expansion",
		} {
			found := false
			for _, e := range got {
				found = found || strings.HasPrefix(e, want)
			}
			if !found {
				t.Errorf("no event %q in %q", want, got)
			}
		}

		sysruntime.GC()
		var ms sysruntime.MemStats
		sysruntime.ReadMemStats(&ms)
		t.Logf("heap in use after the bombs: %.1f MiB", float64(ms.HeapInuse)/(1<<20))
		if ms.HeapInuse > 100<<20 {
			t.Errorf("heap in use %d MiB, want < 100 MiB", ms.HeapInuse>>20)
		}
	})
}
