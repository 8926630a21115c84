package eviction

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

func withEmptyDir(p *v1.Pod, name, limit string) *v1.Pod {
	ed := &v1.EmptyDirVolumeSource{}
	if limit != "" {
		q := resource.MustParse(limit)
		ed.SizeLimit = &q
	}
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}})
	return p
}

func withStorageLimit(p *v1.Pod, i int, limit string) *v1.Pod {
	c := &p.Spec.Containers[i]
	if c.Resources.Limits == nil {
		c.Resources.Limits = v1.ResourceList{}
	}
	c.Resources.Limits[v1.ResourceEphemeralStorage] = resource.MustParse(limit)
	return p
}

func twoContainers(name string) *v1.Pod {
	p := pod(name, 0, "", false)
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d"})
	return p
}

// TestLocalStorageViolation: the kubelet's localStorageEviction rules and
// messages, in its order.
func TestLocalStorageViolation(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pod     *v1.Pod
		stats   PodStats
		wantMsg string
	}{
		{"emptyDir within its sizeLimit", withEmptyDir(pod("p", 0, "", false), "scratch", "1Mi"),
			PodStats{Volumes: map[string]uint64{"scratch": 1 << 20}}, ""},
		{"emptyDir over its sizeLimit", withEmptyDir(pod("p", 0, "", false), "scratch", "1Mi"),
			PodStats{Volumes: map[string]uint64{"scratch": 1<<20 + 1}}, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".`},
		{"emptyDir without sizeLimit is never over", withEmptyDir(pod("p", 0, "", false), "scratch", ""),
			PodStats{Volumes: map[string]uint64{"scratch": 1 << 40}}, ""},
		{"emptyDir of unknown usage", withEmptyDir(pod("p", 0, "", false), "scratch", "1Mi"), PodStats{}, ""},
		{"pod over the sum of its containers' limits", withStorageLimit(withStorageLimit(twoContainers("p"), 0, "1Mi"), 1, "1Mi"),
			PodStats{EphemeralStorage: u64(3 << 20), Containers: map[string]ContainerStats{"c": {EphemeralStorage: u64(1 << 20)}, "d": {EphemeralStorage: u64(1 << 20)}}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "},
		{"pod within the sum, no container over", withStorageLimit(withStorageLimit(twoContainers("p"), 0, "1Mi"), 1, "1Mi"),
			PodStats{EphemeralStorage: u64(2 << 20), Containers: map[string]ContainerStats{"c": {EphemeralStorage: u64(1 << 20)}, "d": {EphemeralStorage: u64(1 << 20)}}}, ""},
		{"a container over its own limit", withStorageLimit(twoContainers("p"), 1, "1Mi"),
			PodStats{EphemeralStorage: u64(1 << 20), Containers: map[string]ContainerStats{"c": {EphemeralStorage: u64(0)}, "d": {EphemeralStorage: u64(1<<20 + 4096)}}},
			`Container d exceeded its local ephemeral storage limit "1Mi". `},
		{"the emptyDir is checked first", withStorageLimit(withEmptyDir(pod("p", 0, "", false), "scratch", "1Ki"), 0, "1Ki"),
			PodStats{EphemeralStorage: u64(1 << 20), Volumes: map[string]uint64{"scratch": 1 << 20}, Containers: map[string]ContainerStats{"c": {EphemeralStorage: u64(1 << 20)}}},
			`Usage of EmptyDir volume "scratch" exceeds the limit "1Ki".`},
		{"the pod's limit before the container's", withStorageLimit(pod("p", 0, "", false), 0, "1Ki"),
			PodStats{EphemeralStorage: u64(1 << 20), Containers: map[string]ContainerStats{"c": {EphemeralStorage: u64(1 << 20)}}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 1Ki. "},
		{"a pod limit with no usage known counts as none", withStorageLimit(pod("p", 0, "", false), 0, "1Ki"), PodStats{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, over := LocalStorageViolation(tt.pod, tt.stats)
			if over != (tt.wantMsg != "") || msg != tt.wantMsg {
				t.Errorf("LocalStorageViolation = %q, %v; want %q", msg, over, tt.wantMsg)
			}
		})
	}
}

// TestLocalStorageEviction: every pod over a limit is evicted in one
// synchronization, without any threshold met, at once, with the message,
// no DisruptionTarget condition and a Warning event; critical pods stay.
func TestLocalStorageEviction(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	over := withEmptyDir(pod("over", 0, "", false), "scratch", "1Mi")
	within := withEmptyDir(pod("within", 0, "", false), "scratch", "1Mi")
	ctr := withStorageLimit(pod("ctr", 0, "", false), 0, "1Mi")
	static := withEmptyDir(pod("static", 0, "", false), "scratch", "1Mi")
	static.Annotations["kubernetes.io/config.source"] = "file"
	stats := diskStats(90, map[types.UID]PodStats{
		"over":   {Volumes: map[string]uint64{"scratch": 2 << 20}},
		"within": {Volumes: map[string]uint64{"scratch": 1 << 10}},
		"ctr":    {EphemeralStorage: u64(1 << 20), Containers: map[string]ContainerStats{"c": {EphemeralStorage: u64(2 << 20)}}},
		"static": {Volumes: map[string]uint64{"scratch": 2 << 20}},
	})
	f := &fakeNode{stats: stats, pods: []*v1.Pod{over, within, ctr, static}}
	m, err := New(f.options(clk, t))
	if err != nil {
		t.Fatal(err)
	}
	evicted, err := m.Synchronize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"over", "ctr"}, names(evicted)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{0, 0}, f.graces); diff != "" {
		t.Errorf("grace periods (-want +got):\n%s", diff)
	}
	wantEvents := []string{
		`Warning Evicted: Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".`,
		`Warning Evicted: Container c exceeded its local ephemeral storage limit "1Mi". `,
	}
	if diff := cmp.Diff(wantEvents, f.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, s := range f.statuses {
		if s.Phase != v1.PodFailed || s.Reason != "Evicted" || len(s.Conditions) != 0 {
			t.Errorf("status %+v, want Failed/Evicted without conditions", s)
		}
	}
	if len(m.Conditions()) != 0 {
		t.Errorf("conditions %v with no threshold met", m.Conditions())
	}

	// Turned off: nobody is evicted.
	f2 := &fakeNode{stats: stats, pods: []*v1.Pod{over}}
	o := f2.options(clk, t)
	o.DisableLocalStorageEviction = true
	m2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if evicted, err := m2.Synchronize(t.Context()); err != nil || len(evicted) != 0 {
		t.Errorf("with DisableLocalStorageEviction: evicted %v, %v", names(evicted), err)
	}
}

func TestPodStatsFromSummary(t *testing.T) {
	n := func(v uint64) *uint64 { return &v }
	s := &statsapi.Summary{Pods: []statsapi.PodStats{{
		PodRef:           statsapi.PodReference{Name: "p", Namespace: "ns", UID: "u1"},
		Memory:           &statsapi.MemoryStats{WorkingSetBytes: n(100)},
		ProcessStats:     &statsapi.ProcessStats{ProcessCount: n(3)},
		EphemeralStorage: &statsapi.FsStats{UsedBytes: n(700), InodesUsed: n(7)},
		VolumeStats:      []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: n(400)}}},
		Containers: []statsapi.ContainerStats{
			{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: n(60)}, Rootfs: &statsapi.FsStats{UsedBytes: n(200)}, Logs: &statsapi.FsStats{UsedBytes: n(100)}},
			{Name: "d"},
		},
	}}}
	for _, dedicated := range []bool{false, true} {
		got := PodStatsFromSummary(s, dedicated)["u1"]
		ctrStorage := u64(300)
		if dedicated {
			ctrStorage = u64(100) // the logs alone
		}
		want := PodStats{MemoryWorkingSet: u64(100), Processes: u64(3), EphemeralStorage: u64(700), Inodes: u64(7),
			Volumes:    map[string]uint64{"scratch": 400},
			Containers: map[string]ContainerStats{"c": {MemoryWorkingSet: u64(60), EphemeralStorage: ctrStorage}, "d": {}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("dedicated image fs %v (-want +got):\n%s", dedicated, diff)
		}
	}
}

// TestCgroupStatsDirectories: without a summary, the emptyDirs are measured
// by name and the containers' logs by container, both counted in the pod's
// ephemeral storage.
func TestCgroupStatsDirectories(t *testing.T) {
	proc, cg, dir := fakeProc(t), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(cg, "memory.stat"), "inactive_file 0\n")
	writeFile(t, filepath.Join(dir, "scratch/data"), strings.Repeat("x", 64<<10))
	writeFile(t, filepath.Join(dir, "logs/c/0.log"), strings.Repeat("y", 16<<10))
	p := withEmptyDir(pod("p", 0, "", false), "scratch", "32Ki")
	c := &CgroupStats{
		CgroupfsRoot:     cg,
		ProcRoot:         proc,
		NodeFsPath:       dir,
		Pods:             func() []*v1.Pod { return []*v1.Pod{p} },
		EmptyDirs:        func(*v1.Pod) map[string]string { return map[string]string{"scratch": filepath.Join(dir, "scratch")} },
		ContainerLogDirs: func(*v1.Pod) map[string]string { return map[string]string{"c": filepath.Join(dir, "logs/c")} },
	}
	s, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Pods["p"]
	vol, logs := ps.Volumes["scratch"], *ps.Containers["c"].EphemeralStorage
	if vol < 64<<10 || logs < 16<<10 || *ps.EphemeralStorage != vol+logs {
		t.Errorf("volume %d, logs %d, pod %d", vol, logs, *ps.EphemeralStorage)
	}
	if msg, over := LocalStorageViolation(p, ps); !over || !strings.Contains(msg, `"scratch"`) {
		t.Errorf("LocalStorageViolation = %q, %v", msg, over)
	}
}
