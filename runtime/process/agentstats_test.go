package process_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/nodeserver/hook"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/stats"
)

// statsHook is a node server that only keeps the summary the agent hands
// it, the one /stats/summary and /metrics/resource serve.
type statsHook struct{ stats chan stats.Summarizer }

func (h *statsHook) Setup() (hook.Setup, error)    { return hook.Setup{}, nil }
func (h *statsHook) Attach(p hook.Parts) error     { h.stats <- p.Stats; return nil }
func (h *statsHook) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// TestAgentSummary: as root, an agent on the default (process) runtime
// with pod cgroups serves a summary with each running container's and
// pod's CPU and memory (what kubectl top pod shows), lists a container in
// its restart back-off with its pod, and lists the node's system
// containers "kubelet" (the agent's own cgroup) and "pods".
func TestAgentSummary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: pod and container cgroups")
	}
	cg, err := cgroup.Open("")
	if err != nil {
		t.Skipf("no cgroup file system: %v", err)
	}
	root := "nodekit-stats-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cg.Destroy(ctx, "/"+root); err != nil {
			t.Errorf("destroy the test's cgroups: %v", err)
		}
	})
	// The agent in a cgroup of its own, its system container "kubelet".
	self := "/" + root + "-agent"
	if err := cg.Create(self, nil); err != nil {
		t.Fatal(err)
	}
	if err := cg.AddProcess(self, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.AddProcess("/", os.Getpid()); err != nil {
			t.Errorf("leave the test's cgroup: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cg.Destroy(ctx, self); err != nil {
			t.Errorf("destroy the test's cgroups: %v", err)
		}
	})
	dir := t.TempDir()
	rt, err := process.New(process.Options{StateDir: filepath.Join(dir, "process"), Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := &statsHook{stats: make(chan stats.Summarizer, 1)}
	src := make(chanSource, 1)
	opts := nodekit.Options{
		NodeName:   "process-test",
		Sources:    []nodekit.NamedSource{{Name: "test", Source: src}},
		Runtime:    rt,
		RootDir:    filepath.Join(dir, "root"),
		Logger:     testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		NodeServer: h,
		// The node server is attached only to an agent with an API client.
		KubeClient: clientset.From(fake.NewClientset()),
	}
	opts.NodeResources.Eviction.Disable = true // the disk of a shared test machine may be under pressure
	opts.RuntimeManager.PodLogsDir = filepath.Join(dir, "logs")
	opts.Cgroups.Root = root
	agent, err := nodekit.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx); rt.Close() }()
	t.Cleanup(func() { cancel(); <-done })
	summarizer := <-h.stats
	if summarizer == nil {
		t.Fatal("the agent hands its node server no summary")
	}

	busy := shPod("busy", v1.RestartPolicyAlways, nil,
		`i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; x=$(head -c 4000000 /dev/zero | tr '\0' a); exec sleep 3600`)
	crash := shPod("crash", v1.RestartPolicyAlways, nil, "exit 1")
	for _, p := range []*v1.Pod{busy, crash} {
		sources.SetDefaults(p)
	}
	src <- []*v1.Pod{busy, crash}

	var s *statsapi.Summary
	find := func(name string) *statsapi.PodStats {
		for i := range s.Pods {
			if s.Pods[i].PodRef.Name == name {
				return &s.Pods[i]
			}
		}
		return nil
	}
	// The busy container spends CPU before it fills its 4 MB string, and
	// its working set can read 0 until then (a shell's few pages are within
	// what the memory controller charges in batches): the wait asks for both.
	workingSet := func(m *statsapi.MemoryStats) bool {
		return m != nil && m.WorkingSetBytes != nil && *m.WorkingSetBytes > 0
	}
	wait(t, "the busy pod's CPU and memory working set in the summary", func() bool {
		if s, err = summarizer.Summary(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		p := find("busy")
		return p != nil && len(p.Containers) == 1 && p.Containers[0].CPU != nil && p.Containers[0].CPU.UsageCoreNanoSeconds != nil &&
			*p.Containers[0].CPU.UsageCoreNanoSeconds > 0 && p.CPU != nil &&
			workingSet(p.Containers[0].Memory) && workingSet(p.Memory)
	})
	wait(t, "the crashing pod's container listed in its back-off", func() bool {
		if s, err = summarizer.Summary(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		p := find("crash")
		return p != nil && len(p.Containers) == 1 && p.Containers[0].Name == "c0"
	})
	names := map[string]bool{}
	for _, c := range s.Node.SystemContainers {
		if c.CPU != nil && c.Memory != nil {
			names[c.Name] = true
		}
	}
	if !names[statsapi.SystemContainerKubelet] || !names[statsapi.SystemContainerPods] {
		t.Errorf("node system containers %v, want kubelet and pods with CPU and memory", names)
	}
	if s.Node.Rlimit == nil || s.Node.Memory == nil {
		t.Errorf("node rlimit %+v memory %+v", s.Node.Rlimit, s.Node.Memory)
	}
}
