package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/volume"
)

// sharePod: the writer writes into an emptyDir, the reader waits for the
// file and prints it, and the host file of a read-only hostPath; the
// reader mounts both read-only.
const sharePod = `apiVersion: v1
kind: Pod
metadata:
  name: share
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: cache
    emptyDir: {}
  - name: data
    hostPath:
      path: $DATA
      type: Directory
  containers:
  - name: writer
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo 'written by the writer' > /cache/msg; trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    volumeMounts:
    - name: cache
      mountPath: /cache
  - name: reader
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "until [ -f /cache/msg ]; do sleep 0.2; done; echo \"reader got: $(cat /cache/msg)\"; echo \"host says: $(cat /data/message.txt)\"; trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    volumeMounts:
    - name: cache
      mountPath: /cache
      readOnly: true
    - name: data
      mountPath: /data
      readOnly: true
`

// hostPathPod mounts the host path $PATH; the allow-list refuses it.
const hostPathPod = `apiVersion: v1
kind: Pod
metadata:
  name: $NAME
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: host
    hostPath:
      path: $PATH
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "cat /host/shadow; sleep 3600"]
    volumeMounts:
    - name: host
      mountPath: /host
`

// execIn runs cmd in container id through CRI ExecSync.
func execIn(t *testing.T, f *fixture, id string, cmd ...string) (stdout, stderr string, err error) {
	t.Helper()
	o, e, err := f.cri.ExecSync(t.Context(), id, cmd, 10*time.Second)
	return string(o), string(e), err
}

// dirEntries lists the names in dir (nil when it does not exist).
func dirEntries(dir string) []string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestVolumes: with AllowedHostPaths set to a directory of the test's own,
// a container writes into an emptyDir that another container of the pod
// reads (its log and ExecSync cat show the writer's line); the emptyDir is
// a directory under the agent's RootDir; the reader prints a file of an
// allowed hostPath; the reader's read-only mounts refuse writes with
// "Read-only file system" while the writer writes the same emptyDir. Pods
// asking for a host path outside the allow-list (/etc, and a symlink under
// the allowed directory that points to /etc) are not started: no sandbox,
// status reason FailedMount and a message naming the path, an error in the
// agent's log; the other pod runs. Once the pods are deleted, their
// directories (emptyDir included) are gone from RootDir and the host
// data is untouched.
func TestVolumes(t *testing.T) {
	f := newFixture(t, envEndpoint)
	allowed := t.TempDir()
	data := filepath.Join(allowed, "data")
	const message = "hello from the host"
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "message.txt"), []byte(message+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(allowed, "escape")
	if err := os.Symlink("/etc", escape); err != nil {
		t.Fatal(err)
	}
	a := f.agentWith(nil, "volumes", func(o *nodekit.Options) {
		o.Volumes.AllowedHostPaths = []volume.AllowedHostPath{{PathPrefix: allowed}}
	})
	f.writeYAML("share", strings.ReplaceAll(sharePod, "$DATA", data))
	forbidden := map[string]string{"etc": "/etc", "symlink": escape}
	for name, path := range forbidden {
		f.writeYAML(name, strings.NewReplacer("$NAME", name, "$PATH", path).Replace(hostPathPod))
	}
	share := f.pod("share")
	eventually(t, 30*time.Second, share+" Running", func() bool { return a.running(share) })
	uid := a.podUID(share)
	s, _ := a.status(share)
	ids := map[string]string{}
	for _, c := range s.ContainerStatuses {
		ids[c.Name] = strings.TrimPrefix(c.ContainerID, "containerd://")
	}
	emptyDir := filepath.Join(f.rootDir, "pods", string(uid), "volumes", "kubernetes.io~empty-dir", "cache")

	t.Run("emptyDir shared by two containers", func(t *testing.T) {
		logPath := filepath.Join(f.logsDir, fmt.Sprintf("%s_%s_%s", f.ns, "share-"+f.node, uid), "reader", "0.log")
		eventually(t, 10*time.Second, "2 lines in "+logPath, func() bool { return len(readCRILog(t, logPath)) >= 2 })
		if got := readCRILog(t, logPath)[0]; got != "reader got: written by the writer" {
			t.Errorf("reader's first log line = %q, want the writer's line", got)
		}
		out, stderr, err := execIn(t, f, ids["reader"], "cat", "/cache/msg")
		if err != nil || out != "written by the writer\n" {
			t.Errorf("ExecSync cat /cache/msg in the reader = %q, %q, %v; want the writer's line", out, stderr, err)
		}
		b, err := os.ReadFile(filepath.Join(emptyDir, "msg"))
		if err != nil || string(b) != "written by the writer\n" {
			t.Errorf("the emptyDir on the host (%s): %q, %v; want the writer's line", emptyDir, b, err)
		}
	})

	t.Run("hostPath read by a container", func(t *testing.T) {
		logPath := filepath.Join(f.logsDir, fmt.Sprintf("%s_%s_%s", f.ns, "share-"+f.node, uid), "reader", "0.log")
		if lines := readCRILog(t, logPath); !slices.Contains(lines, "host says: "+message) {
			t.Errorf("reader's log = %q, want the line %q", lines, "host says: "+message)
		}
	})

	t.Run("read-only mounts refuse writes", func(t *testing.T) {
		for _, p := range []string{"/cache/f", "/data/f"} {
			_, stderr, err := execIn(t, f, ids["reader"], "sh", "-c", "echo x > "+p)
			var exit utilexec.CodeExitError
			if !errors.As(err, &exit) || exit.ExitStatus() == 0 || !strings.Contains(stderr, "Read-only file system") {
				t.Errorf("writing %s in the reader: stderr %q, error %v; want a non-zero exit and Read-only file system", p, stderr, err)
			} else {
				t.Logf("writing %s in the reader: exit %d, %s", p, exit.ExitStatus(), strings.TrimSpace(stderr))
			}
		}
		// The writer's mount of the same emptyDir is writable.
		if _, stderr, err := execIn(t, f, ids["writer"], "sh", "-c", "echo x > /cache/f"); err != nil {
			t.Errorf("writing /cache/f in the writer: %v (%s)", err, stderr)
		}
		if _, err := os.Stat(filepath.Join(data, "f")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a file appeared in the read-only hostPath: %v", err)
		}
	})

	t.Run("host paths outside the allow-list", func(t *testing.T) {
		for name, path := range forbidden {
			pod := f.pod(name)
			var st v1.PodStatus
			eventually(t, 30*time.Second, pod+" with reason FailedMount", func() bool {
				st, _ = a.status(pod)
				return st.Reason == "FailedMount"
			})
			t.Logf("%s: phase %s, reason %s: %s", name, st.Phase, st.Reason, st.Message)
			if !strings.Contains(st.Message, path) || !strings.Contains(st.Message, "outside the allowed host paths") {
				t.Errorf("%s: message %q, want one naming %s as outside the allowed host paths", name, st.Message, path)
			}
			if st.Phase != v1.PodPending {
				t.Errorf("%s: phase %s, want Pending", name, st.Phase)
			}
			if sbs, cs := podObjects(t, f.cri, a.podUID(pod)); len(sbs) != 0 || len(cs) != 0 {
				t.Errorf("%s: %d sandboxes and %d containers in containerd, want none", name, len(sbs), len(cs))
			}
			if n := a.logs.count("Unable to attach or mount volumes", name+"-"+f.node); n == 0 {
				t.Errorf("%s: no error in the agent's log", name)
			}
		}
		if !a.running(share) {
			t.Errorf("%s no longer runs", share)
		}
	})

	t.Run("deleted pods leave no directory, host data untouched", func(t *testing.T) {
		deleted := time.Now()
		f.remove("share")
		for name := range forbidden {
			f.remove(name)
		}
		pods := filepath.Join(f.rootDir, "pods")
		eventually(t, 30*time.Second, "the pod directories removed from "+pods, func() bool { return len(dirEntries(pods)) == 0 })
		t.Logf("manifests removed → pod directories gone: %s", time.Since(deleted).Round(time.Millisecond))
		if _, err := os.Stat(emptyDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the emptyDir %s: %v, want it gone", emptyDir, err)
		}
		eventually(t, 30*time.Second, "sandboxes and containers removed", func() bool {
			sbs, cs := inNamespace(t, f.cri, f.ns)
			return len(sbs) == 0 && len(cs) == 0
		})
		if b, err := os.ReadFile(filepath.Join(data, "message.txt")); err != nil || string(b) != message+"\n" {
			t.Errorf("host file after the pod's deletion: %q, %v; want it untouched", b, err)
		}
		if got := dirEntries(data); !slices.Equal(got, []string{"message.txt"}) {
			t.Errorf("host directory %s holds %v, want only message.txt", data, got)
		}
		if got, err := os.Readlink(escape); err != nil || got != "/etc" {
			t.Errorf("symlink %s → %q, %v; want it untouched", escape, got, err)
		}
	})
}

// fsGroupSubPathPod mounts a subPath of an emptyDir that does not exist
// yet, with an fsGroup, as the upstream "nonexistent volume subPath should
// have the correct mode and owner using FSGroup" spec does.
const fsGroupSubPathPod = `apiVersion: v1
kind: Pod
metadata:
  name: fsgroup-subpath
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  securityContext:
    fsGroup: 123
  volumes:
  - name: test-volume
    emptyDir: {}
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    volumeMounts:
    - name: test-volume
      mountPath: /test-volume
      subPath: test-sub
`

// TestEmptyDirFSGroupSubPath: a subPath of an emptyDir with an fsGroup,
// created by the agent, has the volume root's mode (group-writable,
// setgid) and group in the container.
func TestEmptyDirFSGroupSubPath(t *testing.T) {
	f := newFixture(t, envEndpoint)
	a := f.agentWith(nil, "fsgroup", nil)
	f.writeYAML("fsgroup-subpath", fsGroupSubPathPod)
	pod := f.pod("fsgroup-subpath")
	eventually(t, 30*time.Second, pod+" Running", func() bool { return a.running(pod) })
	s, _ := a.status(pod)
	id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	out, stderr, err := execIn(t, f, id, "stat", "-c", "%A %g", "/test-volume")
	if err != nil {
		t.Fatalf("stat /test-volume: %v (%s)", err, stderr)
	}
	root := filepath.Join(f.rootDir, "pods", string(a.podUID(pod)), "volumes", "kubernetes.io~empty-dir", "test-volume")
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("volume root %v; subPath in the container: %s", fi.Mode(), strings.TrimSpace(out))
	if got, want := strings.TrimSpace(out), "drwxrwsrwx 123"; got != want {
		t.Errorf("subPath /test-volume: %q, want %q (the volume root's mode, group 123)", got, want)
	}
	f.remove("fsgroup-subpath")
	pods := filepath.Join(f.rootDir, "pods")
	eventually(t, 30*time.Second, "the pod directory removed from "+pods, func() bool { return len(dirEntries(pods)) == 0 })
}
