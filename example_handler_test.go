package nodekit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/synchandler"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volume"
)

// loggingSync is a per-pod sync of a user's own: the default one, plus a
// line for each pod it syncs for the first time.
type loggingSync struct{ *podsync.Syncer }

func (s loggingSync) SyncPod(ctx context.Context, t podworker.UpdateType, pod *v1.Pod, st *runtime.PodStatus) (bool, error) {
	if t == podworker.SyncPodCreate {
		fmt.Println("syncing new pod", pod.Name)
	}
	return s.Syncer.SyncPod(ctx, t, pod, st)
}

// handAssembled is an agent assembled by hand from nodekit's exported
// parts, over the runtime rt and the directory dir: a pod source, the
// status, probe, volume and cgroup parts, the runtime manager, the PLEG,
// the pod workers with the per-pod sync that wrap returns, the default
// handler with the admission checks admit, and the sync loop, all run
// from one run.Group. Errors are left out for brevity.
func handAssembled(dir string, rt *runtimetest.Runtime, src sources.Source, wrap func(*podsync.Syncer) podworker.SyncFuncs,
	admit []admission.Handler, observe func(*v1.Pod, v1.PodStatus)) (*run.Group, *synchandler.Handler, *status.Manager) {
	config := sources.NewConfig(sources.ConfigOptions{})
	_ = config.Add("file", src)
	statuses := status.NewManager(status.Options{Observer: observe})
	probes, _ := probe.NewManager(statuses.GetPodStatus, probe.Options{Runtime: rt})
	volumes, _ := volume.NewManager(dir, volume.Options{})
	cgroups, _ := cgroup.NewPodManager(cgroup.PodManagerOptions{Disabled: true})
	rm, _ := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: filepath.Join(dir, "logs")})
	cache, queue := pleg.NewCache(), podworker.NewQueue()
	events, _ := pleg.NewGeneric(rt, rm, cache, pleg.GenericOptions{})
	syncer, _ := podsync.New(podsync.Config{Runtime: rm, Volumes: volumes, Cgroups: cgroups, Probes: probes,
		Statuses: statuses, Cache: cache, Queue: queue})
	workers, _ := podworker.New(wrap(syncer), podworker.Options{Cache: cache, Queue: queue})
	handler, _ := synchandler.New(synchandler.Config{Pods: podmanager.New(), Workers: workers, Statuses: statuses,
		Volumes: volumes, Probes: probes, Cgroups: cgroups, Runtime: rm, Cache: cache, Admit: admit})
	loop, _ := syncloop.New(handler, syncloop.Config{
		Updates: config.Updates(), PLEG: events.Events(), Liveness: probes.Liveness(),
		Readiness: probes.Readiness(), Startup: probes.Startup(), Pods: handler.Pods(), Work: queue,
		SourcesReady: config.SourcesReady,
	})
	g := new(run.Group)
	g.Add("pleg", events)
	g.Add("volume manager", volumes)
	g.Add("probes", probes)
	g.Add("status manager", statuses)
	g.Add("pod workers", workers)
	g.Add("sources", config)
	g.Add("sync loop", loop)
	return g, handler, statuses
}

func helloPod(labels map[string]string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", UID: "hello-1", Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}}},
	}
	sources.SetDefaults(pod)
	return pod
}

// An agent assembled by hand from the exported parts and run from one
// list, with the per-pod sync replaced by a user's own.
func Example_handAssembled() {
	dir, _ := os.MkdirTemp("", "nodekit-example")
	defer os.RemoveAll(dir)
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	running := make(chan string, 1)
	pods := make(sources.Chan, 1)
	g, _, _ := handAssembled(dir, rt, pods, func(s *podsync.Syncer) podworker.SyncFuncs { return loggingSync{s} },
		[]admission.Handler{admission.PodCount(110)},
		func(pod *v1.Pod, s v1.PodStatus) {
			if s.Phase == v1.PodRunning {
				select {
				case running <- pod.Name:
				default:
				}
			}
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()

	pods <- []*v1.Pod{helloPod(nil)}
	fmt.Println(<-running, "is running")
	cancel()
	fmt.Println("stopped:", <-done)
	// Output:
	// syncing new pod hello
	// hello is running
	// stopped: <nil>
}

// The default handler with admission of one's own instead of the
// kubelet's checks: only pods labelled edge=yes are admitted.
func Example_admission() {
	dir, _ := os.MkdirTemp("", "nodekit-example")
	defer os.RemoveAll(dir)
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	edgeOnly := admission.Func(func(pod *v1.Pod, _ []*v1.Pod) admission.Result {
		if pod.Labels["edge"] == "yes" {
			return admission.Result{Admit: true}
		}
		return admission.Result{Reason: "NotForEdge", Message: "the pod is not labelled edge=yes"}
	})
	_, handler, statuses := handAssembled(dir, rt, make(sources.Chan), func(s *podsync.Syncer) podworker.SyncFuncs { return s },
		[]admission.Handler{edgeOnly}, nil)

	pod := helloPod(nil)
	handler.HandlePodAdditions(context.Background(), []*v1.Pod{pod})
	s, _ := statuses.GetPodStatus(pod.UID)
	fmt.Println(s.Phase, s.Reason, s.Message)
	// Output:
	// Failed NotForEdge Pod was rejected: the pod is not labelled edge=yes
}
