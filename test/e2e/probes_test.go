package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// writeYAML writes the static pod manifest name.yaml: body is YAML in
// which $NS stands for the test's namespace.
func (f *fixture) writeYAML(name, body string) {
	f.t.Helper()
	writeManifest(f.t, f.dir, name+".yaml", strings.ReplaceAll(body, "$NS", f.ns))
}

// containerStatus returns the status of the named container.
func containerStatus(s v1.PodStatus, name string) (v1.ContainerStatus, bool) {
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c, true
		}
	}
	return v1.ContainerStatus{}, false
}

// httpReadyPod is the web image with an HTTP readiness probe on port
// (a number or a container port's name): fmt.Sprintf(httpReadyPod, name,
// port).
const httpReadyPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: ` + webImage + `
    imagePullPolicy: IfNotPresent
    ports:
    - name: http
      containerPort: 8080
    readinessProbe:
      httpGet:
        path: /
        port: %s
      periodSeconds: 1
      failureThreshold: 1
      timeoutSeconds: 10
`

// livenessPod touches /tmp/healthy and sleeps; an exec liveness probe
// cats the file.
const livenessPod = `apiVersion: v1
kind: Pod
metadata:
  name: live
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "touch /tmp/healthy; trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    livenessProbe:
      exec:
        command: ["cat", "/tmp/healthy"]
      periodSeconds: 1
      failureThreshold: 2
      timeoutSeconds: 10
`

// TestProbes: against containerd, an HTTP readiness probe on the web
// image's port (by name) makes the pod Ready, after it started not Ready;
// a readiness probe on a port nothing listens on keeps its running pod not
// Ready; an exec liveness probe (cat /tmp/healthy) that fails once the file
// is removed (rm through CRI ExecSync) restarts the container: restart
// count 1, a new container ID, and the new container, whose file exists
// again, is left alone.
func TestProbes(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "probes")
	start := time.Now()
	f.writeYAML("ready", fmt.Sprintf(httpReadyPod, "ready", "http"))
	f.writeYAML("unready", fmt.Sprintf(httpReadyPod, "unready", "8081"))
	f.writeYAML("live", livenessPod)
	ready, unready, live := f.pod("ready"), f.pod("unready"), f.pod("live")

	t.Run("HTTP readiness makes the pod Ready", func(t *testing.T) {
		eventually(t, 30*time.Second, ready+" Ready", func() bool {
			s, _ := a.status(ready)
			return condition(s, v1.PodReady) == v1.ConditionTrue
		})
		t.Logf("manifests written → pod Ready: %s", time.Since(start).Round(time.Millisecond))
		s, _ := a.status(ready)
		c, _ := containerStatus(s, "web")
		if !c.Ready || c.State.Running == nil {
			t.Errorf("container status = %+v, want running and ready", c)
		}
		for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
			if got := condition(s, typ); got != v1.ConditionTrue {
				t.Errorf("condition %s = %q, want True", typ, got)
			}
		}
		// The probe gated readiness: the pod was reported not Ready
		// first, while the probe had not succeeded yet.
		if got, want := a.readyHistory(ready), []v1.ConditionStatus{v1.ConditionFalse, v1.ConditionTrue}; !cmp.Equal(got, want) {
			t.Errorf("Ready condition history = %v, want %v", got, want)
		}
	})

	t.Run("readiness on a closed port keeps the pod not Ready", func(t *testing.T) {
		eventually(t, 30*time.Second, unready+" Running", func() bool { return a.running(unready) })
		// The ready pod, started at the same time, has long been Ready;
		// give this one a few more probe periods.
		time.Sleep(3 * time.Second)
		s, _ := a.status(unready)
		c, _ := containerStatus(s, "web")
		if c.Ready || c.State.Running == nil {
			t.Errorf("container status = %+v, want running and not ready", c)
		}
		if got := a.readyHistory(unready); slices.Contains(got, v1.ConditionTrue) || len(got) == 0 {
			t.Errorf("Ready condition history = %v, want only False", got)
		}
		if got := condition(s, v1.ContainersReady); got != v1.ConditionFalse {
			t.Errorf("ContainersReady = %q, want False", got)
		}
		if s.Phase != v1.PodRunning || c.RestartCount != 0 {
			t.Errorf("phase %s, restarts %d; want Running with no restart (readiness never restarts)", s.Phase, c.RestartCount)
		}
	})

	t.Run("exec liveness failure restarts the container", func(t *testing.T) {
		eventually(t, 30*time.Second, live+" Running", func() bool { return a.running(live) })
		// The probe succeeds while the file is there: no restart.
		time.Sleep(3 * time.Second)
		s, _ := a.status(live)
		c, _ := containerStatus(s, "main")
		if c.RestartCount != 0 || c.State.Running == nil {
			t.Fatalf("before the file's removal: %+v, want running with no restart", c)
		}
		first := strings.TrimPrefix(c.ContainerID, "containerd://")
		if _, stderr, err := f.cri.ExecSync(t.Context(), first, []string{"rm", "/tmp/healthy"}, 5*time.Second); err != nil {
			t.Fatalf("ExecSync rm /tmp/healthy: %v (%s)", err, stderr)
		}
		removed := time.Now()
		var second string
		took := eventually(t, 30*time.Second, live+" restarted by its liveness probe", func() bool {
			s, _ := a.status(live)
			c, _ := containerStatus(s, "main")
			second = strings.TrimPrefix(c.ContainerID, "containerd://")
			return c.RestartCount == 1 && c.State.Running != nil && second != first
		})
		t.Logf("file removed → container restarted: %s (period 1s, failure threshold 2, grace 2s)", took.Round(time.Millisecond))
		if took < time.Second {
			t.Errorf("restarted %s after the file's removal, before two probe failures could have been seen", took)
		}
		s, _ = a.status(live)
		c, _ = containerStatus(s, "main")
		if term := c.LastTerminationState.Terminated; term == nil || term.ContainerID != "containerd://"+first {
			t.Errorf("last termination state = %+v, want the first container's", c.LastTerminationState)
		} else {
			t.Logf("first container: exit code %d, reason %s, finished %s after the removal", term.ExitCode, term.Reason, term.FinishedAt.Sub(removed).Round(time.Second))
		}
		// The new container made its file again: the probe passes and no
		// second restart comes.
		time.Sleep(4 * time.Second)
		s, _ = a.status(live)
		c, _ = containerStatus(s, "main")
		if c.RestartCount != 1 || c.ContainerID != "containerd://"+second || c.State.Running == nil {
			t.Errorf("after the restart: %+v, want the second container %s running, restart count 1", c, second)
		}
	})
}

// condition returns the status of the pod condition typ.
func condition(s v1.PodStatus, typ v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}
