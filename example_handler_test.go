package nodekit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/volume"
)

// loggingSync is a per-pod sync of a user's own: the default one, plus a
// line for each pod it syncs for the first time.
type loggingSync struct{ *nodekit.PodSyncer }

func (s loggingSync) SyncPod(ctx context.Context, t podworker.UpdateType, pod *v1.Pod, st *runtime.PodStatus) (bool, error) {
	if t == podworker.SyncPodCreate {
		fmt.Println("syncing new pod", pod.Name)
	}
	return s.PodSyncer.SyncPod(ctx, t, pod, st)
}

// assembly is the default handler and the parts it is built from.
type assembly struct {
	handler  *nodekit.Handler
	workers  *podworker.Workers
	volumes  *volume.Manager
	statuses *status.Manager
	pleg     *pleg.Generic
}

// assemble builds the default handler from its exported parts over the
// in-memory runtime, with the per-pod sync that wrap returns and the
// admission checks admit.
func assemble(dir string, rt *runtimetest.Runtime, wrap func(*nodekit.PodSyncer) podworker.SyncFuncs, admit []admission.Handler, observe func(*v1.Pod, v1.PodStatus)) assembly {
	statuses := status.NewManager(status.Options{Observer: observe})
	rm, _ := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: filepath.Join(dir, "logs")})
	volumes, _ := volume.NewManager(volume.Options{RootDir: dir})
	probes, _ := probe.NewManager(probe.Options{Runtime: rt, Statuses: statuses.GetPodStatus})
	cgroups, _ := cgroup.NewPodManager(cgroup.PodManagerOptions{Disabled: true})
	cache, queue := pleg.NewCache(), podworker.NewQueue()
	syncer, _ := nodekit.NewPodSyncer(nodekit.PodSyncerConfig{
		Runtime: rm, Volumes: volumes, Cgroups: cgroups, Probes: probes,
		Statuses: statuses, Cache: cache, Queue: queue,
	})
	workers, _ := podworker.New(wrap(syncer), podworker.Options{Cache: cache, Queue: queue})
	handler, _ := nodekit.NewHandler(nodekit.HandlerConfig{
		Pods: nodekit.NewPodManager(), Workers: workers, Statuses: statuses, Volumes: volumes,
		Probes: probes, Cgroups: cgroups, Runtime: rm, Cache: cache, Admit: admit,
	})
	events, _ := pleg.NewGeneric(rt, rm, cache, pleg.GenericOptions{})
	return assembly{handler, workers, volumes, statuses, events}
}

func helloPod(labels map[string]string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", UID: "hello-1", Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}}},
	}
	sources.SetDefaults(pod)
	return pod
}

// The default handler, assembled from its exported parts, with the per-pod
// sync replaced by a user's own.
func ExampleNewHandler() {
	dir, _ := os.MkdirTemp("", "nodekit-example")
	defer os.RemoveAll(dir)
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan string, 1)
	a := assemble(dir, rt, func(s *nodekit.PodSyncer) podworker.SyncFuncs { return loggingSync{s} },
		[]admission.Handler{admission.PodCount(110)},
		func(pod *v1.Pod, s v1.PodStatus) {
			if s.Phase == v1.PodRunning {
				select {
				case running <- pod.Name:
				default:
				}
			}
		})
	go func() { _ = a.workers.Run(ctx) }()
	go func() { _ = a.volumes.Run(ctx) }()
	go func() { _ = a.pleg.Run(ctx) }()

	a.handler.HandlePodAdditions(ctx, []*v1.Pod{helloPod(nil)})
	fmt.Println(<-running, "is running")
	// Output:
	// syncing new pod hello
	// hello is running
}

// The default handler with admission of one's own instead of the
// kubelet's checks: only pods labelled edge=yes are admitted.
func ExampleNewHandler_admission() {
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
	a := assemble(dir, rt, func(s *nodekit.PodSyncer) podworker.SyncFuncs { return s },
		[]admission.Handler{edgeOnly}, nil)

	pod := helloPod(nil)
	a.handler.HandlePodAdditions(context.Background(), []*v1.Pod{pod})
	s, _ := a.statuses.GetPodStatus(pod.UID)
	fmt.Println(s.Phase, s.Reason, s.Message)
	// Output:
	// Failed NotForEdge Pod was rejected: the pod is not labelled edge=yes
}
