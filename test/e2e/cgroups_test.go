package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cgroupfs is where the host mounts its cgroup filesystems.
const cgroupfs = "/sys/fs/cgroup"

// cgroupV1 skips the test unless the host has the cgroup v1 memory and
// cpu controllers (a v1 or hybrid host), where the test reads the limits.
func cgroupV1(t *testing.T) {
	t.Helper()
	for _, c := range []string{"memory", "cpu"} {
		if _, err := os.Stat(filepath.Join(cgroupfs, c, "cgroup.procs")); err != nil {
			t.Skipf("no cgroup v1 %s controller at %s (%v): this test reads cgroup v1 limits", c, filepath.Join(cgroupfs, c), err)
		}
	}
}

// readCgroupFile reads a cgroup v1 file of controller for cgroup path.
func readCgroupFile(t *testing.T, controller, cgroupPath, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cgroupfs, controller, cgroupPath, file))
	if err != nil {
		t.Errorf("reading %s: %v", file, err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procCgroup returns the cgroup v1 path of process pid in the hierarchy of
// controller, from /proc/<pid>/cgroup.
func procCgroup(t *testing.T, pid int, controller string) string {
	t.Helper()
	fh, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return parts[2]
			}
		}
	}
	t.Fatalf("process %d is in no %s cgroup", pid, controller)
	return ""
}

// podCgroupDirs lists the directories of cgroup name (such as
// /nodekit-e2e-1a2b3c/pod<UID>) that exist in any hierarchy.
func podCgroupDirs(name string) []string {
	var found []string
	entries, _ := os.ReadDir(cgroupfs)
	for _, e := range entries {
		if d := filepath.Join(cgroupfs, e.Name(), name); isDir(d) {
			found = append(found, d)
		}
	}
	return found
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

const guaranteedPod = `apiVersion: v1
kind: Pod
metadata:
  name: guaranteed
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    resources:
      limits:
        cpu: 250m
        memory: 64Mi
`

// oomPod is Burstable (requests below limits), with a 32Mi memory limit
// that tail /dev/zero (a line that never ends, buffered whole) exceeds.
const oomPod = `apiVersion: v1
kind: Pod
metadata:
  name: oom
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: hog
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["tail", "/dev/zero"]
    resources:
      requests:
        cpu: 50m
        memory: 16Mi
      limits:
        memory: 32Mi
`

// TestPodCgroups, on a cgroup v1 host: the agent makes its pods' cgroups
// under its own root, and containerd makes the containers' below them
// with their limits. A Guaranteed pod limited to 64Mi and 250m CPU gets
// <root>/pod<UID> with memory.limit_in_bytes 67108864 and a CFS quota of
// 25000µs, and so does its container, whose process is found in a cgroup
// below the pod's. A Burstable container that allocates beyond its 32Mi
// limit is OOMKilled (exit code 137, reason OOMKilled) and restarted. Once
// the pods are deleted, the agent removes their cgroups from every
// hierarchy.
func TestPodCgroups(t *testing.T) {
	cgroupV1(t)
	f := newFixture(t, envEndpoint)
	a := f.agent(nil, "pod cgroups")
	written := time.Now()
	f.writeYAML("guaranteed", guaranteedPod)
	f.writeYAML("oom", oomPod)
	gpod, opod := f.pod("guaranteed"), f.pod("oom")
	root := "/" + f.cgroupRoot

	eventually(t, 30*time.Second, gpod+" Running", func() bool { return a.running(gpod) })
	for _, qos := range []string{"", "burstable", "besteffort"} {
		if d := filepath.Join(cgroupfs, "memory", root, qos); !isDir(d) {
			t.Errorf("node cgroup %s is missing", d)
		}
	}
	guid := a.podUID(gpod)
	gcg := root + "/pod" + string(guid)

	t.Run("Guaranteed pod and container limits", func(t *testing.T) {
		s, _ := a.status(gpod)
		if s.QOSClass != v1.PodQOSGuaranteed {
			t.Errorf("QoS class = %s, want Guaranteed", s.QOSClass)
		}
		if got := readCgroupFile(t, "memory", gcg, "memory.limit_in_bytes"); got != "67108864" {
			t.Errorf("pod cgroup %s: memory.limit_in_bytes = %s, want 67108864", gcg, got)
		}
		if got := readCgroupFile(t, "cpu", gcg, "cpu.cfs_quota_us"); got != "25000" {
			t.Errorf("pod cgroup %s: cpu.cfs_quota_us = %s, want 25000", gcg, got)
		}
		if got := readCgroupFile(t, "cpu", gcg, "cpu.shares"); got != "256" {
			t.Errorf("pod cgroup %s: cpu.shares = %s, want 256", gcg, got)
		}
		c, _ := containerStatus(s, "main")
		pid := containerPID(t, f.cri, strings.TrimPrefix(c.ContainerID, "containerd://"))
		ccg := procCgroup(t, pid, "memory")
		t.Logf("container process %d: memory cgroup %s", pid, ccg)
		if !strings.HasPrefix(ccg, gcg+"/") {
			t.Fatalf("container's memory cgroup %s is not below the pod's, %s", ccg, gcg)
		}
		if got := readCgroupFile(t, "memory", ccg, "memory.limit_in_bytes"); got != "67108864" {
			t.Errorf("container cgroup %s: memory.limit_in_bytes = %s, want 67108864", ccg, got)
		}
		if cpu := procCgroup(t, pid, "cpu"); !strings.HasPrefix(cpu, gcg+"/") {
			t.Errorf("container's cpu cgroup %s is not below the pod's, %s", cpu, gcg)
		} else if got := readCgroupFile(t, "cpu", cpu, "cpu.cfs_quota_us"); got != "25000" {
			t.Errorf("container cgroup %s: cpu.cfs_quota_us = %s, want 25000", cpu, got)
		}
	})

	var ouid types.UID
	t.Run("beyond its memory limit: OOMKilled and restarted", func(t *testing.T) {
		var last *v1.ContainerStateTerminated
		eventually(t, 60*time.Second, opod+" OOMKilled and restarted", func() bool {
			s, _ := a.status(opod)
			c, ok := containerStatus(s, "hog")
			last = c.LastTerminationState.Terminated
			return ok && c.RestartCount >= 1 && last != nil
		})
		ouid = a.podUID(opod)
		ocg := root + "/burstable/pod" + string(ouid)
		if got := readCgroupFile(t, "memory", ocg, "memory.limit_in_bytes"); got != "33554432" {
			t.Errorf("Burstable pod cgroup %s: memory.limit_in_bytes = %s, want 33554432", ocg, got)
		}
		s, _ := a.status(opod)
		c, _ := containerStatus(s, "hog")
		if q := s.QOSClass; q != v1.PodQOSBurstable {
			t.Errorf("QoS class = %s, want Burstable", q)
		}
		t.Logf("manifest written → a restart seen: %s; restarts %d; last termination: exit code %d, reason %q, after running %s",
			time.Since(written).Round(time.Millisecond), c.RestartCount, last.ExitCode, last.Reason, last.FinishedAt.Sub(last.StartedAt.Time))
		if last.ExitCode != 137 || last.Reason != "OOMKilled" {
			t.Errorf("last termination = exit code %d, reason %q; want 137, OOMKilled", last.ExitCode, last.Reason)
		}
		if s.Phase != v1.PodRunning {
			t.Errorf("phase = %s, want Running (the container is restarted)", s.Phase)
		}
	})
	if ouid == "" {
		ouid = a.podUID(opod)
	}

	t.Run("deleted pods lose their cgroups", func(t *testing.T) {
		deleted := time.Now()
		f.remove("guaranteed")
		f.remove("oom")
		cgs := []string{gcg, root + "/burstable/pod" + string(ouid)}
		var left []string
		eventually(t, 30*time.Second, "the pods' cgroups removed from every hierarchy", func() bool {
			left = nil
			for _, cg := range cgs {
				left = append(left, podCgroupDirs(cg)...)
			}
			return len(left) == 0
		})
		t.Logf("manifests removed → pod cgroups gone: %s", time.Since(deleted).Round(time.Millisecond))
		eventually(t, 30*time.Second, "sandboxes and containers removed", func() bool {
			sbs, cs := inNamespace(t, f.cri, f.ns)
			return len(sbs) == 0 && len(cs) == 0
		})
		// The node cgroups stay while the agent runs.
		if d := filepath.Join(cgroupfs, "memory", root); !isDir(d) {
			t.Errorf("node cgroup %s went with the pods", d)
		}
	})
}
