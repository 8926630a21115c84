package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// usernsManifest is a pod that sleeps, with hostUsers as given ("" for
// unset).
func usernsManifest(name, namespace, hostUsers string) string {
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
%s  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", %q]
`, name, namespace, field, busyboxImage, sleepScript)
}

// TestUserNamespaces runs a hostUsers: false pod and a default pod on
// containerd 2.x. When the runtime's default handler reports the
// UserNamespaces feature (containerd 2.x with a runc that has idmap
// mounts, runc >= 1.2), the first pod's container sees a
// /proc/self/uid_map and gid_map that map its IDs 0-65535 to the block
// the agent wrote to the pod's directory, the default pod sees the
// host's identity map, and the block's file goes with the pod. When it
// does not (Debian's runc 1.1.5 has no idmap mounts), the first pod gets
// no sandbox, with the kubelet's message, and the default pod runs.
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

	a := f.agent(nil, "userns")
	writeManifest(t, f.dir, "isolated.yaml", usernsManifest("isolated", f.ns, "false"))
	writeManifest(t, f.dir, "plain.yaml", usernsManifest("plain", f.ns, ""))
	isolated, plain := f.pod("isolated"), f.pod("plain")

	eventually(t, time.Minute, plain+" Running", func() bool { return a.running(plain) })
	readMap := func(pod, file string) string {
		t.Helper()
		s, _ := a.status(pod)
		id := containerIDs(s)["main"]
		out, stderr, err := f.cri.ExecSync(t.Context(), id, []string{"cat", file}, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: cat %s: %v (stderr %q)", pod, file, err, stderr)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	const identity = "0 0 4294967295"
	if got := readMap(plain, "/proc/self/uid_map"); got != identity {
		t.Errorf("%s: uid_map %q, want the host's %q", plain, got, identity)
	}

	if !supported {
		const want = "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		eventually(t, time.Minute, "the sandbox failure logged", func() bool { return a.logs.count(want) > 0 })
		if a.running(isolated) {
			t.Errorf("%s runs on a runtime without user namespaces", isolated)
		}
		if s, ok := a.status(isolated); ok && len(s.ContainerStatuses) > 0 && s.ContainerStatuses[0].State.Waiting == nil {
			t.Errorf("%s: container state %+v, want waiting", isolated, s.ContainerStatuses[0].State)
		}
		return
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
	got := readMap(isolated, "/proc/self/uid_map")
	t.Logf("%s: uid_map %q; %s: uid_map %q", isolated, got, plain, identity)
	if got != want {
		t.Errorf("%s: uid_map %q, want %q", isolated, got, want)
	}
	if got := readMap(isolated, "/proc/self/gid_map"); got != want {
		t.Errorf("%s: gid_map %q, want %q", isolated, got, want)
	}
	if s, _ := a.status(isolated); s.Phase != v1.PodRunning {
		t.Errorf("%s: phase %s", isolated, s.Phase)
	}

	// The pod goes: its directory, with the mapping file, goes too.
	f.remove("isolated")
	eventually(t, time.Minute, "the pod's directory removed", func() bool {
		_, err := os.Stat(filepath.Dir(file))
		return os.IsNotExist(err)
	})
}
