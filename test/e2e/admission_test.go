package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit"
)

// events keeps the events an agent records, as "Type Reason Message".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Event(_ apiruntime.Object, eventtype, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, eventtype+" "+reason+" "+message)
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// TestAdmissionOnContainerd: on a real containerd, a pod with an unsafe
// sysctl is rejected at admission (phase Failed, reason SysctlForbidden, a
// Warning event) and never reaches the runtime, where runc would fail its
// sandbox at each retry; the same sysctl, once allowed, runs. A
// runAsNonRoot container whose image runs as root is refused with
// CreateContainerConfigError and the kubelet's message, and never created.
func TestAdmissionOnContainerd(t *testing.T) {
	f := newFixture(t, envEndpoint)
	ev := &events{}
	a := f.agentWith(nil, "admission", func(o *nodekit.Options) {
		o.Events = ev
		o.AllowedUnsafeSysctls = []string{"kernel.shmmni"}
	})
	sysctlPod := func(name, sysctl, value string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  terminationGracePeriodSeconds: 1
  securityContext:
    sysctls:
    - name: %s
      value: %q
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "cat /proc/sys/%s; sleep 3600"]
`, name, f.ns, sysctl, value, busyboxImage, strings.ReplaceAll(sysctl, ".", "/"))
	}
	writeManifest(t, f.dir, "unsafe.yaml", sysctlPod("unsafe", "kernel.msgmax", "65536"))
	writeManifest(t, f.dir, "allowed.yaml", sysctlPod("allowed", "kernel.shmmni", "8192"))
	writeManifest(t, f.dir, "nonroot.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: nonroot
  namespace: %s
spec:
  terminationGracePeriodSeconds: 1
  securityContext:
    runAsNonRoot: true
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, f.ns, busyboxImage))

	unsafe, allowed, nonroot := f.pod("unsafe"), f.pod("allowed"), f.pod("nonroot")
	eventually(t, time.Minute, "the allowed sysctl's pod running", func() bool { return a.running(allowed) })
	eventually(t, 30*time.Second, "the unsafe sysctl's pod rejected", func() bool { return a.phase(unsafe) == v1.PodFailed })
	s, _ := a.status(unsafe)
	wantMsg := `forbidden sysctl: "kernel.msgmax" not allowlisted`
	if s.Reason != "SysctlForbidden" || s.Message != "Pod was rejected: "+wantMsg {
		t.Errorf("unsafe: status %s/%s %q, want Failed/SysctlForbidden %q", s.Phase, s.Reason, s.Message, "Pod was rejected: "+wantMsg)
	}
	if !slices.Contains(ev.all(), "Warning SysctlForbidden "+wantMsg) {
		t.Errorf("no Warning SysctlForbidden event in %q", ev.all())
	}

	want := `container has runAsNonRoot and image will run as root (pod: "` +
		strings.TrimPrefix(nonroot, f.ns+"/") + "_" + f.ns + "(" + string(a.podUID(nonroot)) + `)", container: main)`
	eventually(t, time.Minute, "the runAsNonRoot container refused", func() bool {
		s, _ := a.status(nonroot)
		for _, c := range s.ContainerStatuses {
			if w := c.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && w.Message == want {
				return true
			}
		}
		return false
	})
	if !slices.Contains(ev.all(), "Warning Failed Error: "+want) {
		t.Errorf("no Warning Failed event %q in %q", "Error: "+want, ev.all())
	}

	// Let the agent retry a few times: the rejected pod must never reach
	// containerd, and the refused container must never be created.
	time.Sleep(3 * time.Second)
	if uid := a.podUID(unsafe); uid == "" {
		t.Error("the rejected pod is unknown to the agent")
	} else if sbs, cs := podObjects(t, f.cri, uid); len(sbs) != 0 || len(cs) != 0 {
		t.Errorf("the rejected pod reached containerd: %d sandboxes, %d containers", len(sbs), len(cs))
	}
	if sbs, cs := podObjects(t, f.cri, a.podUID(nonroot)); len(sbs) != 1 || len(cs) != 0 {
		t.Errorf("runAsNonRoot pod in containerd: %d sandboxes, %d containers; want its sandbox only", len(sbs), len(cs))
	}
	if s, _ := a.status(allowed); s.Phase != v1.PodRunning {
		t.Errorf("allowed sysctl's pod: %s", s.Phase)
	}
}
