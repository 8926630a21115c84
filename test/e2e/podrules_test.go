package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// sidecarPod: the sidecar side becomes started (its startup probe finds
// /tmp/ready) 2 s after it starts; the init container init runs after
// that; main takes 2 s to stop on SIGTERM, side stops at once.
const sidecarPod = `apiVersion: v1
kind: Pod
metadata:
  name: sidecars
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 20
  initContainers:
  - name: side
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "sleep 2; touch /tmp/ready; trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    startupProbe:
      exec:
        command: ["test", "-f", "/tmp/ready"]
      periodSeconds: 1
      failureThreshold: 60
      timeoutSeconds: 10
  - name: init
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'sleep 2; exit 0' TERM; while true; do sleep 1 & wait; done"]
`

// TestSidecarsOnContainerd: a pod with a sidecar (restartable init
// container) and a startup probe runs on containerd in the kubelet's
// order: the next init container starts only once the sidecar's startup
// probe succeeded (2 s after the sidecar started), the app container after
// the init container completed; the status shows the sidecar running,
// started and ready, the init container Completed, the pod Running and
// Initialized. When the pod is deleted, the sidecar is told to stop only
// after the app container stopped (which takes it 2 s).
func TestSidecarsOnContainerd(t *testing.T) {
	f := newFixture(t, envEndpoint)
	rs, calls := newCounting(f.cri)
	a := f.agent(rs, "sidecars")
	f.writeYAML("sidecars", sidecarPod)
	pod := f.pod("sidecars")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })

	s, _ := a.status(pod)
	if len(s.InitContainerStatuses) != 2 {
		t.Fatalf("init container statuses: %+v", s.InitContainerStatuses)
	}
	side, init := s.InitContainerStatuses[0], s.InitContainerStatuses[1]
	if side.State.Running == nil || side.Started == nil || !*side.Started || !side.Ready {
		t.Errorf("sidecar status: %+v, want running, started and ready", side)
	}
	if init.State.Terminated == nil || init.State.Terminated.ExitCode != 0 || init.State.Terminated.Reason != "Completed" {
		t.Errorf("init container status: %+v, want terminated Completed", init.State)
	}
	main, _ := containerStatus(s, "main")
	if main.State.Running == nil {
		t.Fatalf("main status: %+v", main.State)
	}
	if side.State.Running != nil && init.State.Terminated != nil {
		// The init container waited for the sidecar's startup probe.
		if d := init.State.Terminated.StartedAt.Sub(side.State.Running.StartedAt.Time); d < 1500*time.Millisecond {
			t.Errorf("init container started %s after the sidecar, before its startup probe could succeed (2s)", d)
		}
		if main.State.Running.StartedAt.Before(&init.State.Terminated.StartedAt) {
			t.Errorf("main started at %s, before the init container (%s)", main.State.Running.StartedAt, init.State.Terminated.StartedAt)
		}
	}
	for _, c := range s.Conditions {
		if c.Type == v1.PodInitialized && c.Status != v1.ConditionTrue {
			t.Errorf("Initialized = %s %s", c.Status, c.Message)
		}
	}
	sideID := strings.TrimPrefix(side.ContainerID, "containerd://")
	mainID := strings.TrimPrefix(main.ContainerID, "containerd://")

	f.remove("sidecars")
	uid := a.podUID(pod)
	eventually(t, 60*time.Second, "the pod's containers stopped", func() bool {
		_, cs := podObjects(t, f.cri, uid)
		for _, c := range cs {
			if c.State.String() == "CONTAINER_RUNNING" {
				return false
			}
		}
		return true
	})
	var sideStop, mainStop time.Time
	for _, c := range calls.Calls() {
		if c.Method != "StopContainer" {
			continue
		}
		switch c.ID {
		case sideID:
			if sideStop.IsZero() {
				sideStop = c.At
			}
		case mainID:
			if mainStop.IsZero() {
				mainStop = c.At
			}
		}
	}
	if sideStop.IsZero() || mainStop.IsZero() {
		t.Fatalf("StopContainer calls: side at %v, main at %v", sideStop, mainStop)
	}
	if d := sideStop.Sub(mainStop); d < 1500*time.Millisecond {
		t.Errorf("the sidecar was stopped %s after main, before main had stopped (2s)", d)
	}
	eventually(t, 60*time.Second, "the pod removed from containerd", func() bool {
		sbs, cs := podObjects(t, f.cri, uid)
		return len(sbs) == 0 && len(cs) == 0
	})
	f.expectNothingLeft()
}

// rulesPod: retry counts its runs in an emptyDir and exits 42 twice, then
// 0; its rule restarts it on 42 although its restart policy (and the
// pod's) is Never.
const rulesPod = `apiVersion: v1
kind: Pod
metadata:
  name: rules
  namespace: $NS
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes:
  - name: data
    emptyDir: {}
  containers:
  - name: retry
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes:
        operator: In
        values: [42]
    command: ["sh", "-c", "echo run >> /data/runs; [ $(wc -l < /data/runs) -ge 3 ] && exit 0; exit 42"]
    volumeMounts:
    - name: data
      mountPath: /data
`

// restartAllPod: trigger exits 7 on its first run, which restarts every
// container of the pod in place (init included); on its second run it
// sleeps. init and trigger record their runs in an emptyDir.
const restartAllPod = `apiVersion: v1
kind: Pod
metadata:
  name: restartall
  namespace: $NS
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes:
  - name: data
    emptyDir: {}
  initContainers:
  - name: init
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo init >> /data/events"]
    volumeMounts:
    - name: data
      mountPath: /data
  containers:
  - name: trigger
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes:
        operator: In
        values: [7]
    command: ["sh", "-c", "n=$(grep -c trigger /data/events); echo trigger >> /data/events; [ $n -eq 0 ] && exit 7; trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    volumeMounts:
    - name: data
      mountPath: /data
`

// TestRestartRulesOnContainerd: container-level restart rules on
// containerd. A container whose rule restarts it on exit code 42 (pod and
// container restartPolicy Never) runs three times and the pod Succeeds
// with restartCount 2. A container exiting 7 with a RestartAllContainers
// rule has every container of the pod removed and started over in the
// same sandbox: the init container runs again, the pod ends Running and
// Initialized, AllContainersRestarting False, the trigger restarted once.
func TestRestartRulesOnContainerd(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "restart rules")
	f.writeYAML("rules", rulesPod)
	f.writeYAML("restartall", restartAllPod)

	rules := f.pod("rules")
	eventually(t, 90*time.Second, rules+" Succeeded", func() bool { return a.phase(rules) == v1.PodSucceeded })
	s, _ := a.status(rules)
	if c, _ := containerStatus(s, "retry"); c.RestartCount != 2 || c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
		t.Errorf("retry: %d restarts, state %+v; want 2 restarts and exit code 0", c.RestartCount, c.State)
	}

	all := f.pod("restartall")
	uid := a.podUID(all)
	events := filepath.Join(f.rootDir, "pods", string(uid), "volumes", "kubernetes.io~empty-dir", "data", "events")
	eventually(t, 90*time.Second, "init and trigger run twice ("+events+")", func() bool {
		b, _ := os.ReadFile(events)
		return string(b) == "init\ntrigger\ninit\ntrigger\n"
	})
	eventually(t, 30*time.Second, all+" Running", func() bool { return a.running(all) })
	s, _ = a.status(all)
	if c, _ := containerStatus(s, "trigger"); c.RestartCount != 1 {
		t.Errorf("trigger: %d restarts, want 1", c.RestartCount)
	}
	sbs, _ := podObjects(t, f.cri, uid)
	if len(sbs) != 1 {
		t.Errorf("%d sandboxes, want the pod restarted in its one sandbox", len(sbs))
	}
	want := map[v1.PodConditionType]v1.ConditionStatus{v1.PodInitialized: v1.ConditionTrue, v1.AllContainersRestarting: v1.ConditionFalse}
	for _, c := range s.Conditions {
		if w, ok := want[c.Type]; ok {
			if c.Status != w {
				t.Errorf("condition %s = %s, want %s", c.Type, c.Status, w)
			}
			delete(want, c.Type)
		}
	}
	if len(want) != 0 {
		t.Errorf("conditions missing: %v", want)
	}
	f.remove("rules")
	f.remove("restartall")
	eventually(t, 60*time.Second, "the pods removed from containerd", func() bool {
		sbs, cs := inNamespace(t, f.cri, f.ns)
		return len(sbs) == 0 && len(cs) == 0
	})
}
