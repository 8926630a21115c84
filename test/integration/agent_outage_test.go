package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// outageCyclesEnv names the variable that sets how many outages
// TestAgentAPIServerOutages runs; with it set, each outage lasts 10–40 s
// (the soak), else 3 outages of 10 s.
const outageCyclesEnv = "NODEKIT_OUTAGE_CYCLES"

// actWithin is how soon after the API server is back the agent must act
// on a pod change.
const actWithin = 5 * time.Second

func (s *apiServer) kill() { s.run("kill") }

// pushSource sends each snapshot pushed to it.
type pushSource chan []*v1.Pod

func (s pushSource) Run(ctx context.Context, out chan<- []*v1.Pod) error {
	for {
		select {
		case pods := <-s:
			select {
			case out <- pods:
			case <-ctx.Done():
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// lineLog is a logger that keeps every line, with the time it was written.
type lineLog struct {
	t  *testing.T
	mu sync.Mutex
	at []time.Time
	ln []string
}

func (l *lineLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		l.mu.Lock()
		l.at = append(l.at, time.Now())
		l.ln = append(l.ln, line)
		l.mu.Unlock()
		l.t.Log(line)
	}, funcr.Options{Verbosity: 0})
}

// between returns the lines written in [from, to) that contain s.
func (l *lineLog) between(from, to time.Time, s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, at := range l.at {
		if !at.Before(from) && at.Before(to) && strings.Contains(l.ln[i], s) {
			out = append(out, l.ln[i])
		}
	}
	return out
}

// TestAgentAPIServerOutages runs the agent (in-memory runtime) against an
// API server of its own that it kills and starts again, cycle after cycle
// (the data, port and credentials kept), with a static pod whose mirror
// pod the agent keeps. After each return, a pod created and a pod deleted
// then are acted on within 5 s: the new pod's container runs and the
// deleted pod's container stops. While the API server is away,
// housekeeping logs no error, and the mirror pod manager one line when it
// goes away, although the static pods changed and their mirror pods wait
// for it. The new static pod's mirror pod must exist within a minute of
// the return (the mirror pod manager backs off up to 8 s).
//
// By default it runs 3 outages of 10 s; NODEKIT_OUTAGE_CYCLES=10 runs 10
// outages of 10–40 s each, up 30 s in between, and logs each cycle's
// figures.
func TestAgentAPIServerOutages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the outages take minutes")
	}
	cycles, soak := 3, false
	if v := os.Getenv(outageCyclesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of cycles", outageCyclesEnv, v)
		}
		cycles, soak = n, true
	}
	srv := startAPIServer(t)
	c := newClient(t, srv.kubeconfig())
	nodeName := uniqueName("outages")
	cleanupNode(t, c, nodeName)

	// One static pod all along, and one replaced at each outage.
	newStatic := func(name string) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.example/busybox:1", Command: []string{"sleep", "3600"}}}},
		}
		sources.StaticPodDefaults(p, "/etc/nodekit/manifests/"+name+".yaml", nodeName)
		return p
	}
	static := newStatic("static")
	statics := make(pushSource, 1)
	statics <- []*v1.Pod{static}
	mirrorExists := func(p *v1.Pod) bool {
		m, err := c.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
		return err == nil && m.Annotations[sources.AnnotationMirror] == p.Annotations[sources.AnnotationHash]
	}

	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	logs := &lineLog{t: t}
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, srv.kubeconfig()),
		Sources:        []nodekit.NamedSource{{Name: sources.FileSource, Source: statics}},
		Runtime:        rt,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		Logger:         logs.logger().WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)

	running := func(uid types.UID) bool {
		cs, err := rt.ListContainers(t.Context(), &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{runtime.LabelPodUID: string(uid)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs) > 0
	}
	// waitActed returns how long after since cond held, polling every
	// 50 ms for up to a minute (then it fails the test and returns the
	// minute).
	waitActed := func(since time.Time, what string, cond func() bool) time.Duration {
		deadline := since.Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Errorf("%s: not within a minute", what)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(since)
	}
	newCyclePod := func(i int) *v1.Pod {
		p := newPod(fmt.Sprintf("%s-%d", nodeName, i), nodeName)
		p.Spec.Containers[0].Command = []string{"sleep", "3600"}
		return createPod(t, c, p)
	}

	eventually(t, 30*time.Second, "the Node Ready", func() error { return nodeReady(t.Context(), c, nodeName) })
	eventually(t, 30*time.Second, "the static pod's mirror pod", func() error {
		_, err := c.CoreV1().Pods(static.Namespace).Get(t.Context(), static.Name, metav1.GetOptions{})
		return err
	})
	prev := newCyclePod(0)
	waitActed(time.Now(), prev.Name+" running", func() bool { return running(prev.UID) })
	if t.Failed() {
		t.FailNow()
	}

	var worst time.Duration
	for i := 1; i <= cycles; i++ {
		down, up := 10*time.Second, 3*time.Second
		if soak {
			down, up = 10*time.Second+rand.N(30*time.Second), 30*time.Second
		}
		srv.kill()
		killed := time.Now()
		// The static pods change while it is away: mirror pods to create
		// and delete once it is back.
		churned := newStatic(fmt.Sprintf("static-%d", i))
		statics <- []*v1.Pod{static, churned}
		time.Sleep(down)
		srv.restart()
		back := time.Now()
		// Housekeeping passes every 2 s while it is away; the mirror pods
		// have work that fails meanwhile.
		hkErrs := logs.between(killed, back, "Housekeeping failed")
		mirrorErrs := logs.between(killed, back, `agent/mirror "msg"=`) // error lines: no level

		changed := time.Now()
		next := newCyclePod(i)
		if err := c.CoreV1().Pods(prev.Namespace).Delete(t.Context(), prev.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var started, stopped time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { started = waitActed(changed, next.Name+" running", func() bool { return running(next.UID) }) })
		wg.Go(func() { stopped = waitActed(changed, prev.Name+" stopped", func() bool { return !running(prev.UID) }) })
		wg.Wait()
		mirrored := waitActed(back, churned.Name+"'s mirror pod", func() bool { return mirrorExists(churned) })
		t.Logf("cycle %d: down %v (kill to ready %v); after the return: new pod running in %v, deleted pod stopped in %v, new static pod's mirror in %v; while away: %d housekeeping error lines, %d mirror lines",
			i, down.Round(time.Second), back.Sub(killed).Round(100*time.Millisecond),
			started.Round(10*time.Millisecond), stopped.Round(10*time.Millisecond), mirrored.Round(10*time.Millisecond), len(hkErrs), len(mirrorErrs))
		worst = max(worst, started, stopped)
		if started > actWithin || stopped > actWithin {
			t.Errorf("cycle %d: the pod changes made after the API server's return were acted on in %v and %v, want within %v",
				i, started.Round(10*time.Millisecond), stopped.Round(10*time.Millisecond), actWithin)
		}
		if len(hkErrs) > 0 || len(mirrorErrs) > 1 {
			t.Errorf("cycle %d: %d housekeeping error lines and %d mirror lines while the API server was away, want none and at most one:\n%s",
				i, len(hkErrs), len(mirrorErrs), strings.Join(append(hkErrs, mirrorErrs...), "\n"))
		}
		prev = next
		time.Sleep(up)
	}
	t.Logf("%d outages: the slowest action on a pod change after a return took %v", cycles, worst.Round(10*time.Millisecond))
}
