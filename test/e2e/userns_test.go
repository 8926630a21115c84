package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// usernsManifest is a pod that sleeps, with hostUsers as given ("" for
// unset), an emptyDir volume "data" at /data, and extra spec lines.
func usernsManifest(name, namespace, hostUsers, extra string) string {
	field := ""
	if hostUsers != "" {
		field = "  hostUsers: " + hostUsers + "\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  terminationGracePeriodSeconds: 5
%s%s  volumes:
  - name: data
    emptyDir: {}
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", %q]
    volumeMounts:
    - name: data
      mountPath: /data
`, name, namespace, field, extra, busyboxImage, sleepScript)
}

// TestUserNamespaces runs a hostUsers: false pod and a default pod on
// containerd 2.x, whose runc (hack/containerd.sh builds runc 1.4 for it)
// has idmapped mounts, so that its default handler reports the
// UserNamespaces feature: the first pod's container sees a
// /proc/self/uid_map and gid_map that map its IDs 0-65535 to the block
// the agent wrote to the pod's directory, not the host's identity map
// the default pod sees; its emptyDir volume is idmapped as the kubelet
// asks (a file the host's root made there is root's in the container,
// a file the container's root made is the host's root's, where without
// idmapping they would be nobody's and the block's first ID's); the
// block's file goes with the pod. A static pod with hostUsers: false
// and hostNetwork is refused at its source and never runs. Outside
// hack/test.sh (NODEKIT_E2E_REQUIRED unset), a containerd 2.x whose runc
// lacks idmapped mounts (Debian's runc 1.1.5) is checked as
// containerd 1.6 is.
func TestUserNamespaces(t *testing.T) {
	f := newFixture(t, envEndpoint2)
	st, err := f.cri.Status(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	supported := false
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" {
			supported = h.GetFeatures().GetUserNamespaces()
		}
	}
	t.Logf("default runtime handler reports user namespaces: %t", supported)
	if !supported {
		if os.Getenv(envRequired) != "" {
			t.Fatalf("containerd 2.x (%s) does not report user namespaces for its default handler: its runc lacks idmapped mounts (hack/containerd.sh gives it runc from %s)", os.Getenv(envEndpoint2), "~/.cache/nodekit/runc-*")
		}
		checkUserNamespacesRefused(t, f)
		return
	}

	a := f.agent(nil, "userns")
	writeManifest(t, f.dir, "isolated.yaml", usernsManifest("isolated", f.ns, "false", ""))
	writeManifest(t, f.dir, "plain.yaml", usernsManifest("plain", f.ns, "", ""))
	writeManifest(t, f.dir, "hostnet.yaml", usernsManifest("hostnet", f.ns, "false", "  hostNetwork: true\n"))
	isolated, plain := f.pod("isolated"), f.pod("plain")

	eventually(t, time.Minute, plain+" Running", func() bool { return a.running(plain) })
	exec := func(pod string, cmd ...string) string {
		t.Helper()
		s, _ := a.status(pod)
		id := containerIDs(s)["main"]
		out, stderr, err := f.cri.ExecSync(t.Context(), id, cmd, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v: %v (stderr %q)", pod, cmd, err, stderr)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	const identity = "0 0 4294967295"
	if got := exec(plain, "cat", "/proc/self/uid_map"); got != identity {
		t.Errorf("%s: uid_map %q, want the host's %q", plain, got, identity)
	}

	eventually(t, time.Minute, isolated+" Running", func() bool { return a.running(isolated) })
	uid := a.podUID(isolated)
	file := filepath.Join(f.rootDir, "pods", string(uid), "userns")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the pod's mapping file: %v", err)
	}
	var mappings struct {
		UIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"uidMappings"`
		GIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"gidMappings"`
	}
	if err := json.Unmarshal(data, &mappings); err != nil || len(mappings.UIDMappings) != 1 || len(mappings.GIDMappings) != 1 {
		t.Fatalf("mapping file %s: %v", data, err)
	}
	m := mappings.UIDMappings[0]
	if m.ContainerID != 0 || m.Length != 65536 || m.HostID < 65536 || m.HostID%65536 != 0 || mappings.GIDMappings[0] != m {
		t.Fatalf("mapping file %s: not one 65536-ID block from 65536 up", data)
	}
	want := fmt.Sprintf("0 %d 65536", m.HostID)
	got := exec(isolated, "cat", "/proc/self/uid_map")
	t.Logf("%s: uid_map %q; %s: uid_map %q", isolated, got, plain, identity)
	if got != want {
		t.Errorf("%s: uid_map %q, want %q", isolated, got, want)
	}
	if got := exec(isolated, "cat", "/proc/self/gid_map"); got != want {
		t.Errorf("%s: gid_map %q, want %q", isolated, got, want)
	}
	if s, _ := a.status(isolated); s.Phase != v1.PodRunning {
		t.Errorf("%s: phase %s", isolated, s.Phase)
	}

	// The volume is idmapped: IDs on the host are the same IDs in the
	// container, both ways.
	vol := filepath.Join(f.rootDir, "pods", string(uid), "volumes", "kubernetes.io~empty-dir", "data")
	if err := os.WriteFile(filepath.Join(vol, "from-host"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := exec(isolated, "stat", "-c", "%u:%g", "/data/from-host"); got != "0:0" {
		t.Errorf("%s: a file of the host's root in the volume is %s in the container, want 0:0 (idmapped)", isolated, got)
	}
	exec(isolated, "touch", "/data/from-container")
	fi, err := os.Stat(filepath.Join(vol, "from-container"))
	if err != nil {
		t.Fatal(err)
	}
	if sys, ok := fi.Sys().(*syscall.Stat_t); !ok || sys.Uid != 0 || sys.Gid != 0 {
		t.Errorf("%s: a file of the container's root in the volume is %+v on the host, want 0:0 (idmapped)", isolated, fi.Sys())
	}

	// The static pod with a host namespace never got past its source.
	const refused = "spec.hostNetwork: Forbidden: when `hostUsers` is false"
	eventually(t, time.Minute, "the hostNetwork manifest refused", func() bool { return a.logs.count("bad manifest", refused) > 0 })
	if _, ok := a.status(f.pod("hostnet")); ok {
		t.Errorf("%s has a status: the agent took it", f.pod("hostnet"))
	}

	// The pod goes: its directory, with the mapping file, goes too.
	f.remove("isolated")
	eventually(t, time.Minute, "the pod's directory removed", func() bool {
		_, err := os.Stat(filepath.Dir(file))
		return os.IsNotExist(err)
	})
}

// TestUserNamespacesContainerd16: containerd 1.6 reports no runtime
// handler features, so a hostUsers: false pod gets no sandbox, with the
// kubelet's message, and a default pod runs.
func TestUserNamespacesContainerd16(t *testing.T) {
	checkUserNamespacesRefused(t, newFixture(t, envEndpoint))
}

// checkUserNamespacesRefused runs a hostUsers: false pod and a default
// pod on f's runtime, whose default handler does not report user
// namespaces: the first gets no sandbox, with the kubelet's message; the
// second runs in the host's user namespace.
func checkUserNamespacesRefused(t *testing.T, f *fixture) {
	t.Helper()
	a := f.agent(nil, "userns refused")
	writeManifest(t, f.dir, "isolated.yaml", usernsManifest("isolated", f.ns, "false", ""))
	writeManifest(t, f.dir, "plain.yaml", usernsManifest("plain", f.ns, "", ""))
	isolated, plain := f.pod("isolated"), f.pod("plain")
	eventually(t, time.Minute, plain+" Running", func() bool { return a.running(plain) })
	const want = "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	eventually(t, time.Minute, "the sandbox failure logged", func() bool { return a.logs.count(want) > 0 })
	if a.running(isolated) {
		t.Errorf("%s runs on a runtime without user namespaces", isolated)
	}
	if s, ok := a.status(isolated); ok && len(s.ContainerStatuses) > 0 && s.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("%s: container state %+v, want waiting", isolated, s.ContainerStatuses[0].State)
	}
}

// runtimeHandlersReported returns nil once the agent's Node reports, as
// status.runtimeHandlers, the handlers hack/containerd.sh configures for
// containerd 2.x: the default one ("") and "runc", both with
// recursiveReadOnlyMounts (runc 1.4 on a kernel of 5.12 or later) and with
// userNamespaces as the runtime reports it for its default handler (true
// with the runc hack/containerd.sh builds, which NODEKIT_E2E_REQUIRED
// insists on).
func (c *cluster) runtimeHandlersReported(t *testing.T) error {
	st, err := c.cri.Status(t.Context(), false)
	if err != nil {
		return err
	}
	userns := false
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" {
			userns = h.GetFeatures().GetUserNamespaces()
		}
	}
	if !userns && os.Getenv(envRequired) != "" {
		return fmt.Errorf("containerd 2.x does not report user namespaces for its default handler")
	}
	// Every handler the runtime lists (hack/containerd.sh configures
	// runc-b beside runc), each with the features it reports.
	var want []v1.NodeRuntimeHandler
	for _, h := range st.GetRuntimeHandlers() {
		rro, un := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		want = append(want, v1.NodeRuntimeHandler{Name: h.GetName(), Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &un}})
	}
	if len(want) < 2 {
		return fmt.Errorf("containerd 2.x lists %d runtime handlers, want the default and runc at least", len(want))
	}
	slices.SortFunc(want, func(a, b v1.NodeRuntimeHandler) int { return strings.Compare(a.Name, b.Name) })
	n, err := c.api.CoreV1().Nodes().Get(t.Context(), c.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got := slices.Clone(n.Status.RuntimeHandlers)
	slices.SortFunc(got, func(a, b v1.NodeRuntimeHandler) int { return strings.Compare(a.Name, b.Name) })
	if !equality.Semantic.DeepEqual(want, got) {
		return fmt.Errorf("node %s: runtimeHandlers %s, want %s", c.node, handlersString(n.Status.RuntimeHandlers), handlersString(want))
	}
	t.Logf("node %s: runtimeHandlers %s", c.node, handlersString(n.Status.RuntimeHandlers))
	return nil
}

func handlersString(hs []v1.NodeRuntimeHandler) string {
	var parts []string
	for _, h := range hs {
		f := h.Features
		if f == nil {
			f = &v1.NodeRuntimeHandlerFeatures{}
		}
		parts = append(parts, fmt.Sprintf("%q(recursiveReadOnlyMounts=%v userNamespaces=%v)", h.Name, ptrString(f.RecursiveReadOnlyMounts), ptrString(f.UserNamespaces)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func ptrString(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}
