package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podruntime"
)

// mapObjects is a standalone agent's own ConfigMaps and Secrets, which the
// test may change.
type mapObjects struct {
	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (m *mapObjects) getter() objects.Funcs {
	return objects.Funcs{
		ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if cm, ok := m.configMaps[ns+"/"+name]; ok {
				return cm, nil
			}
			return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
		},
		Secret: func(_ context.Context, ns, name string) (*v1.Secret, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if s, ok := m.secrets[ns+"/"+name]; ok {
				return s, nil
			}
			return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
		},
	}
}

func (m *mapObjects) setSecret(ns, name string, data map[string][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.secrets[ns+"/"+name] = &v1.Secret{Data: data}
}

// envPod reads its environment from a Secret, a ConfigMap (envFrom with a
// prefix, and a volume of the same getter), the downward API and its own
// resources.
const envPod = `apiVersion: v1
kind: Pod
metadata:
  name: envpod
  namespace: $NS
  labels:
    app: envtest
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: cfg
    configMap:
      name: settings
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    resources:
      limits:
        memory: 64Mi
    envFrom:
    - prefix: CFG_
      configMapRef:
        name: settings
    env:
    - name: DB_PASSWORD
      valueFrom:
        secretKeyRef:
          name: db
          key: password
    - name: DSN
      value: "user:$(DB_PASSWORD)@$(CFG_host)"
    - name: APP
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['app']
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: MEM_MI
      valueFrom:
        resourceFieldRef:
          resource: limits.memory
          divisor: 1Mi
    volumeMounts:
    - name: cfg
      mountPath: /etc/cfg
`

// missingPod needs a Secret that does not exist yet.
const missingPod = `apiVersion: v1
kind: Pod
metadata:
  name: missing
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    env:
    - name: TOKEN
      valueFrom:
        secretKeyRef:
          name: late
          key: token
`

// TestEnvFromObjects: a standalone agent given its own ConfigMaps and
// Secrets (Options.Objects) runs a pod whose environment, read inside the
// container with env, holds the Secret's value, the prefixed ConfigMap
// keys, a $(VAR) composed of both, a label, the sandbox's IP and the
// memory limit in Mi, and whose configMap volume shows the same
// ConfigMap. A pod needing a Secret that does not exist waits with
// CreateContainerConfigError and the message `secrets "late" not found`,
// then runs once the Secret appears, with its value.
func TestEnvFromObjects(t *testing.T) {
	f := newFixture(t, envEndpoint)
	objs := &mapObjects{
		configMaps: map[string]*v1.ConfigMap{f.ns + "/settings": {Data: map[string]string{"host": "db.local", "mode": "fast", "data-1": "value-1"}}},
		secrets:    map[string]*v1.Secret{f.ns + "/db": {Data: map[string][]byte{"password": []byte("s3cret")}}},
	}
	a := f.agentWith(nil, "env", func(o *nodekit.Options) { o.Objects = objs.getter() })
	writeManifest(t, f.dir, "envpod.yaml", strings.ReplaceAll(envPod, "$NS", f.ns))
	writeManifest(t, f.dir, "missing.yaml", strings.ReplaceAll(missingPod, "$NS", f.ns))

	pod := f.pod("envpod")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	s, _ := a.status(pod)
	id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	out, _, err := execIn(t, f, id, "env")
	if err != nil {
		t.Fatalf("exec env: %v", err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	// A key that is not a shell identifier (the upstream "consumable via
	// the environment" specs use data-1) is in the container's
	// environment as the runtime gives it; a shell may drop it from what
	// it passes on (Debian's busybox 1.35 ash does), which "sh -c env"
	// then shows.
	want := map[string]string{
		"DB_PASSWORD": "s3cret", "CFG_host": "db.local", "CFG_mode": "fast", "DSN": "user:s3cret@db.local",
		"APP": "envtest", "MEM_MI": "64", "CFG_data-1": "value-1",
	}
	if out, _, err := execIn(t, f, id, "sh", "-c", "env"); err == nil && !strings.Contains(out, "CFG_data-1=") {
		t.Logf("the image's shell drops CFG_data-1 from the environment it passes on (sh -c env does not show it)")
	}
	if len(s.PodIPs) > 0 {
		want["POD_IP"] = s.PodIPs[0].IP
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	if got["POD_IP"] == "" {
		t.Errorf("env POD_IP is empty (pod IPs %v)", s.PodIPs)
	}
	if out, _, err := execIn(t, f, id, "cat", "/etc/cfg/host"); err != nil || out != "db.local" {
		t.Errorf("configMap volume file host = %q, %v; want db.local", out, err)
	}

	missing := f.pod("missing")
	eventually(t, 30*time.Second, missing+" waiting with CreateContainerConfigError", func() bool {
		s, ok := a.status(missing)
		if !ok || len(s.ContainerStatuses) == 0 || s.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := s.ContainerStatuses[0].State.Waiting
		return w.Reason == "CreateContainerConfigError" && w.Message == `secrets "late" not found`
	})
	objs.setSecret(f.ns, "late", map[string][]byte{"token": []byte("t0k3n")})
	eventually(t, 60*time.Second, missing+" Running once the Secret exists", func() bool { return a.running(missing) })
	s, _ = a.status(missing)
	id = strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	if out, _, err := execIn(t, f, id, "sh", "-c", "echo -n $TOKEN"); err != nil || out != "t0k3n" {
		t.Errorf("TOKEN = %q, %v; want t0k3n", out, err)
	}
}

// hooksPod: postStart writes a file that the main process waits for;
// preStop writes to the main process's stdout and takes a second; the main
// process says when it gets SIGTERM.
const hooksPod = `apiVersion: v1
kind: Pod
metadata:
  name: hooks
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'echo got-sigterm; exit 0' TERM; until [ -f /tmp/poststart ]; do sleep 0.1; done; echo saw-poststart; while true; do sleep 1 & wait; done"]
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "echo hello > /tmp/poststart"]
      preStop:
        exec:
          command: ["sh", "-c", "echo prestop-ran > /proc/1/fd/1; sleep 1"]
`

// termPods: one writes its termination message file and exits 3, one
// fails with FallbackToLogsOnError and an empty file, one has a postStart
// hook that fails, and one a postStart hook that hangs.
const termPods = `apiVersion: v1
kind: Pod
metadata:
  name: msgfile
  namespace: $NS
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    terminationMessagePath: /dev/termination-log
    command: ["sh", "-c", "printf 'all done: %s' 42 > /dev/termination-log; exit 3"]
---
`

const fallbackPod = `apiVersion: v1
kind: Pod
metadata:
  name: fallback
  namespace: $NS
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo starting; echo 'fatal: disk on fire' >&2; exit 1"]
`

const failHookPod = `apiVersion: v1
kind: Pod
metadata:
  name: failhook
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "echo no-good; exit 7"]
`

const hangHookPod = `apiVersion: v1
kind: Pod
metadata:
  name: hanghook
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    lifecycle:
      postStart:
        exec:
          command: ["sleep", "3600"]
`

// TestHooksAndTerminationMessages, on containerd: the postStart hook runs
// (the main process sees its file); on removal the preStop hook's line is
// in the log before the process's SIGTERM line. A container that writes
// its termination-message file and exits 3 shows that message in its
// terminated state; one that fails under FallbackToLogsOnError shows its
// log's tail. A failing postStart hook kills the container (waiting
// reason PostStartHookError). A postStart hook that hangs blocks neither
// the other pods (they all ran meanwhile) nor the pod's removal.
func TestHooksAndTerminationMessages(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "hooks")
	f.writeYAML("hanghook", hangHookPod)
	f.writeYAML("hooks", hooksPod)
	f.writeYAML("msgfile", strings.TrimSuffix(termPods, "---\n"))
	f.writeYAML("fallback", fallbackPod)
	f.writeYAML("failhook", failHookPod)

	hooks := f.pod("hooks")
	eventually(t, 60*time.Second, hooks+" Running", func() bool { return a.running(hooks) })
	uid := a.podUID(hooks)
	logPath := filepath.Join(f.logsDir, f.ns+"_hooks-"+f.node+"_"+string(uid), "main", "0.log")
	eventually(t, 20*time.Second, "saw-poststart in the log", func() bool {
		return slices.Contains(readCRILog(t, logPath), "saw-poststart")
	})

	terminated := func(pod string) *v1.ContainerStateTerminated {
		s, ok := a.status(pod)
		if !ok || len(s.ContainerStatuses) == 0 {
			return nil
		}
		return s.ContainerStatuses[0].State.Terminated
	}
	msgfile := f.pod("msgfile")
	eventually(t, 60*time.Second, msgfile+" terminated with its message", func() bool {
		tm := terminated(msgfile)
		return tm != nil && tm.ExitCode == 3 && tm.Message == "all done: 42"
	})
	fallback := f.pod("fallback")
	var last *v1.ContainerStateTerminated
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("last terminated state of %s: %+v", fallback, *last)
			dir := filepath.Join(f.logsDir, f.ns+"_fallback-"+f.node+"_"+string(a.podUID(fallback)), "main", "0.log")
			data, err := os.ReadFile(dir)
			t.Logf("its log: %q %v", data, err)
		}
	})
	eventually(t, 60*time.Second, fallback+" terminated with its log's tail", func() bool {
		last = terminated(fallback)
		// The runtime copies stdout and stderr apart: either order.
		return last != nil && last.ExitCode == 1 && (last.Message == "starting\nfatal: disk on fire\n" || last.Message == "fatal: disk on fire\nstarting\n")
	})
	failhook := f.pod("failhook")
	eventually(t, 60*time.Second, failhook+" waiting with PostStartHookError", func() bool {
		return a.sawWaiting(failhook, "PostStartHookError")
	})

	// The hung hook: its pod never runs, and goes away when removed.
	hang := f.pod("hanghook")
	if a.running(hang) {
		t.Errorf("%s is Running while its postStart hook hangs", hang)
	}
	hangUID := a.podUID(hang)
	f.remove("hanghook")
	eventually(t, 60*time.Second, hang+" removed despite its hung hook", func() bool {
		sbs, cs := podObjects(t, f.cri, hangUID)
		return len(sbs) == 0 && len(cs) == 0
	})

	f.remove("hooks")
	eventually(t, 30*time.Second, "got-sigterm in the log", func() bool {
		return slices.Contains(readCRILog(t, logPath), "got-sigterm")
	})
	lines := readCRILog(t, logPath)
	pre, term := slices.Index(lines, "prestop-ran"), slices.Index(lines, "got-sigterm")
	if pre < 0 || pre > term {
		t.Errorf("log lines = %q: want prestop-ran before got-sigterm", lines)
	}

	// Let the agent remove the other pods (failhook restarts in a loop), so
	// that the clean-up never meets a container the agent is starting.
	for _, name := range []string{"failhook", "msgfile", "fallback"} {
		f.remove(name)
	}
	eventually(t, 60*time.Second, "the agent to remove every pod", func() bool {
		sbs, cs := inNamespace(t, f.cri, f.ns)
		return len(sbs) == 0 && len(cs) == 0
	})
}

const deadlinePod = `apiVersion: v1
kind: Pod
metadata:
  name: deadline
  namespace: $NS
spec:
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
`

// TestActiveDeadline, on containerd: a running pod with
// activeDeadlineSeconds 3 fails with reason DeadlineExceeded once they
// passed (woken by the work queue, not by a change of the pod), and its
// container is stopped.
func TestActiveDeadline(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "deadline")
	f.writeYAML("deadline", deadlinePod)
	pod := f.pod("deadline")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	took := eventually(t, 30*time.Second, pod+" Failed with DeadlineExceeded", func() bool {
		s, _ := a.status(pod)
		return s.Phase == v1.PodFailed && s.Reason == "DeadlineExceeded" &&
			s.Message == "Pod was active on the node longer than the specified deadline"
	})
	t.Logf("Running → Failed(DeadlineExceeded) in %s", took.Round(time.Millisecond))
	uid := a.podUID(pod)
	// Wait for the agent to finish (the sandbox stopped too), so that the
	// clean-up does not stop the sandbox at the same time.
	eventually(t, 30*time.Second, "the container and sandbox stopped", func() bool {
		sbs, cs := podObjects(t, f.cri, uid)
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false
			}
		}
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false
			}
		}
		return true
	})
	// How long after the deadline the container stopped (the kubelet
	// takes about 1 s): from the pod's start time, as the agent holds it.
	s, _ := a.status(pod)
	if _, cs := podObjects(t, f.cri, uid); len(cs) == 1 && s.StartTime != nil {
		st, err := f.cri.ContainerStatus(t.Context(), cs[0].Id, false)
		if err == nil && st.GetStatus().GetFinishedAt() != 0 {
			deadline := s.StartTime.Add(3 * time.Second)
			t.Logf("container stopped %v after the deadline", time.Unix(0, st.GetStatus().GetFinishedAt()).Sub(deadline).Round(time.Millisecond))
		}
	}
}

const dnsPod = `apiVersion: v1
kind: Pod
metadata:
  name: dns
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  hostname: h1
  subdomain: sub
  hostAliases:
  - ip: 10.9.9.9
    hostnames: [foo.local, bar.local]
  dnsConfig:
    searches: [extra.example]
    options:
    - name: ndots
      value: "2"
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
`

// TestDNSAndHosts, on containerd: with cluster DNS settings, a
// ClusterFirst pod's /etc/resolv.conf names the cluster DNS server, the
// cluster's search domains first and the pod's own last, and the pod's
// ndots; its /etc/hosts is the kubelet's managed file with the pod's IP
// under its FQDN (hostname.subdomain.namespace.svc.domain) and the
// hostAliases; the hostname is the pod's.
func TestDNSAndHosts(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agentWith(nil, "dns", func(o *nodekit.Options) {
		o.RuntimeManager.DNS = podruntime.DNSOptions{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
	})
	f.writeYAML("dns", dnsPod)
	pod := f.pod("dns")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	s, _ := a.status(pod)
	id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")

	resolv, _, err := execIn(t, f, id, "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	var search, servers, options string
	for _, l := range strings.Split(resolv, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "search":
			search = strings.Join(f[1:], " ")
		case len(f) > 0 && f[0] == "nameserver":
			servers += f[1] + " "
		case len(f) > 0 && f[0] == "options":
			options = strings.Join(f[1:], " ")
		}
	}
	if servers != "10.96.0.10 " {
		t.Errorf("nameservers = %q, want 10.96.0.10 alone (resolv.conf:\n%s)", servers, resolv)
	}
	if want := f.ns + ".svc.cluster.local svc.cluster.local cluster.local "; !strings.HasPrefix(search, want) || !strings.HasSuffix(search, " extra.example") {
		t.Errorf("search = %q, want the cluster's domains first and extra.example last", search)
	}
	if options != "ndots:2" {
		t.Errorf("options = %q, want ndots:2", options)
	}

	hosts, _, err := execIn(t, f, id, "cat", "/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	ip := s.PodIPs[0].IP
	for _, want := range []string{
		"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n",
		ip + "\th1.sub." + f.ns + ".svc.cluster.local\th1\n",
		"\n# Entries added by HostAliases.\n10.9.9.9\tfoo.local\tbar.local\n",
	} {
		if !strings.Contains(hosts, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
		}
	}
	if out, _, err := execIn(t, f, id, "hostname"); err != nil || strings.TrimSpace(out) != "h1" {
		t.Errorf("hostname = %q, %v; want h1", out, err)
	}
}

const seccompPod = `apiVersion: v1
kind: Pod
metadata:
  name: seccomp
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    securityContext:
      runAsUser: 1234
      runAsGroup: 2345
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities:
        drop: [ALL]
`

// TestSecurityContext, on containerd: the container runs as the user and
// group asked, under the runtime's default seccomp filter (mode 2), with
// no-new-privileges, no capabilities, and a read-only root file system.
func TestSecurityContext(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "security")
	f.writeYAML("seccomp", seccompPod)
	pod := f.pod("seccomp")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	s, _ := a.status(pod)
	id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	out, _, err := execIn(t, f, id, "cat", "/proc/1/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	for k, want := range map[string]string{
		"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0000000000000000",
		"Uid": "1234 1234 1234 1234", "Gid": "2345 2345 2345 2345",
	} {
		if fields[k] != want {
			t.Errorf("/proc/1/status %s = %q, want %q", k, fields[k], want)
		}
	}
	if _, stderr, err := execIn(t, f, id, "touch", "/x"); err == nil || !strings.Contains(stderr, "Read-only file system") {
		t.Errorf("touch /x: err %v, stderr %q; want a read-only root", err, stderr)
	}
}

const hostNetEnvPod = `apiVersion: v1
kind: Pod
metadata:
  name: hostnet-env
  namespace: $NS
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: HOST_IP
      valueFrom:
        fieldRef:
          fieldPath: status.hostIP
`

// TestHostNetworkPodIP, on containerd: a hostNetwork pod's podIP is the
// node's (its host IP), in its status and in its container's POD_IP, as
// the upstream "Downward API should provide host IP and pod IP as an env
// var if pod uses host network" spec wants. The agent is standalone: the
// node's IP is the one it is given (node.Options.InternalIP).
func TestHostNetworkPodIP(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agentWith(nil, "hostnet-env", func(o *nodekit.Options) { o.Node.InternalIP = net.ParseIP("192.0.2.10") })
	f.writeYAML("hostnet-env", hostNetEnvPod)
	pod := f.pod("hostnet-env")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	s, _ := a.status(pod)
	if s.HostIP != "192.0.2.10" || s.PodIP != s.HostIP || len(s.PodIPs) == 0 || s.PodIPs[0].IP != s.HostIP {
		t.Errorf("podIP %q, podIPs %v, want the host IP %q", s.PodIP, s.PodIPs, s.HostIP)
	}
	id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	out, _, err := execIn(t, f, id, "env")
	if err != nil {
		t.Fatalf("exec env: %v", err)
	}
	for _, want := range []string{"POD_IP=" + s.HostIP, "HOST_IP=" + s.HostIP} {
		if !slices.Contains(strings.Split(out, "\n"), want) {
			t.Errorf("the container's environment lacks %s:\n%s", want, out)
		}
	}
	f.remove("hostnet-env")
	eventually(t, 60*time.Second, "the agent to remove the pod", func() bool {
		sbs, cs := inNamespace(t, f.cri, f.ns)
		return len(sbs) == 0 && len(cs) == 0
	})
}
