package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/volume"
)

// Environment variables that make TestSoak longer, for runs by hand:
// NODEKIT_SOAK_ROUNDS (default 2), NODEKIT_SOAK_DURATION (a Go duration:
// rounds go on until it has passed, whatever NODEKIT_SOAK_ROUNDS says),
// NODEKIT_SOAK_PODS (default 4 static and 4 API pods) and
// NODEKIT_SOAK_SEED (default: the time; the seed is logged).
const (
	envSoakRounds   = "NODEKIT_SOAK_ROUNDS"
	envSoakDuration = "NODEKIT_SOAK_DURATION"
	envSoakPods     = "NODEKIT_SOAK_PODS"
	envSoakSeed     = "NODEKIT_SOAK_SEED"
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// soakConverge is how long the soak waits for the agent to converge after
// a fault.
const soakConverge = 90 * time.Second

// Fault kinds, as the soak counts them.
const (
	faultAgent           = "agent restart"
	faultAgentOffline    = "agent restart with the API server down"
	faultContainerd      = "containerd kill -9"
	faultSandboxInFlight = "containerd kill -9 during RunPodSandbox"
	faultAPIServer       = "API server kill -9"
	faultDisk            = "disk full"
)

// TestSoak keeps static pods and API pods under churn on a containerd of
// its own and an API server of its own (kube-apiserver and etcd, which
// the soak kills; the shared one of the other tests is left alone), with
// the agent's root directory on a small tmpfs. Each round creates,
// updates and deletes manifests and API pods at random (an API pod's
// update swaps its image), while one static pod crash-loops, one fails
// its liveness probe (restarted again and again) and one API pod fails
// its readiness probe; then it injects, one after the other:
//
//   - an agent restart;
//   - containerd killed (SIGKILL; its shims and containers live on) and
//     started again;
//   - containerd killed while a RunPodSandbox is in flight: a hook in the
//     agent's runtime reports the call as it is issued, for a pod the soak
//     creates, and the test kills containerd after a random part of the
//     shortest time such a call took (so at different steps of the
//     sandbox's creation);
//   - the API server killed (kube-apiserver and etcd, SIGKILL) and started
//     again with its data; in every other round the agent is also
//     restarted while it is down (an offline restart, from the checkpoint);
//   - the disk filled (blocks and inodes) while a static and an API pod
//     are created, then freed.
//
// After every fault, once the agent has converged, it checks:
//
//   - every desired pod runs its latest spec: one sandbox (ready) and one
//     running container, under the UID of that spec (no pod lost or run
//     twice); the probe-failing and crash-looping pods have one sandbox;
//   - for API pods, the API server's status is the runtime's truth: phase
//     Running, the container ID containerd runs, Ready as the probes say;
//     a deleted API pod is gone from the API server;
//   - nothing is left of a deleted or replaced pod: no sandbox, container,
//     pod directory, mount under it, pod cgroup, nor IP reservation (every
//     reservation belongs to one of the test's ready sandboxes, one each);
//   - a healthy pod keeps its sandbox and container across the fault;
//   - while the disk is full, the new static pod's status says why it does
//     not start (FailedToMakePodDataDirectories);
//   - the test's goroutines and heap stay flat: at the end, no more than
//     at the first convergence plus a margin (150 goroutines, 30 per pod
//     more; twice the heap plus 64MiB), and goleak finds none left once
//     everything stopped.
//
// The eviction manager is off: with the disk full on purpose it would
// evict pods, which the invariants count as lost. Figures (faults by kind,
// pods churned, violations) are logged at the end.
func TestSoak(t *testing.T) {
	kubeconfigPath(t) // the private API server needs the shared one's binaries
	// A containerd of the test's own, since the soak kills it.
	in := startInstance(t, "1.6")
	f := newFixtureAt(t, in.endpoint)
	// The agent's root directory on a tmpfs small enough to fill, in blocks
	// and inodes; unmounted after the agent stopped and the mounts below
	// were undone (clean-ups run last-in first-out).
	if err := syscall.Mount("tmpfs", f.rootDir, "tmpfs", 0, "size=32m,nr_inodes=8192"); err != nil {
		t.Fatalf("mounting a tmpfs on the agent's root directory: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(f.rootDir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", f.rootDir, err)
		}
	})
	c := newClusterOn(t, f, true)
	// The agents' last log lines only, printed if the test fails: all of
	// them would grow the heap the soak measures.
	f.logLines = 5000

	rounds := envInt(t, envSoakRounds, 2)
	var duration time.Duration
	if s := os.Getenv(envSoakDuration); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", envSoakDuration, s)
		}
		duration = d
	}
	nPods := envInt(t, envSoakPods, 4)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envSoakSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSoakSeed, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (%s=%d repeats this run), %d rounds or %v, %d static and %d API pods", seed, envSoakSeed, seed, rounds, duration, nPods, nPods)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := t.Context()

	imageIDs := map[string]string{}
	for _, img := range []string{busyboxImage, webImage} {
		st, err := f.cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img}, false)
		if err != nil || st.GetImage() == nil {
			t.Fatalf("image %s: %v (status %v)", img, err, st)
		}
		imageIDs[img] = st.GetImage().GetId()
	}
	podCgroups, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Root: f.cgroupRoot})
	if err != nil {
		t.Fatal(err)
	}

	var (
		faults                        = map[string]int{}
		creates, updates, deletes     int
		violations                    int
		sandboxCalls, sandboxCallsCut int
		halfMade                      int      // sandboxes of cut calls that containerd kept
		roundGoroutines, roundHeaps   []string // at each round's start
		roundPods                     []string
		goroutines, heaps, podCounts  []int
	)
	violation := func(format string, args ...any) {
		t.Helper()
		violations++
		t.Errorf(format, args...)
	}

	// Static pods: name → version of its manifest; API pods: name → image.
	desired := map[string]int{}
	desiredAPI := map[string]string{}
	write := func(name string, version int) {
		f.write(podSpec{name: name, grace: 2, script: fmt.Sprintf(`echo v%d; %s`, version, sleepScript)})
		desired[name] = version
	}
	sleeper := v1.Container{Name: "main", Command: []string{"sh", "-c", sleepScript}}
	createAPI := func(name string) {
		c.createPod(c.apiPod(name, sleeper))
		desiredAPI[name] = busyboxImage
	}
	const crasher, liveness, unready = "crasher", "liveness", "unready"
	f.write(podSpec{name: crasher, grace: 2, script: "sleep 1; exit 1"})
	f.writeYAML(liveness, `apiVersion: v1
kind: Pod
metadata:
  name: `+liveness+`
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: `+busyboxImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", `+strconv.Quote(sleepScript)+`]
    livenessProbe:
      exec: {command: ["false"]}
      periodSeconds: 1
      failureThreshold: 1
`)
	probed := sleeper
	probed.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1}
	c.createPod(c.apiPod(unready, probed))
	next, nextAPI := 0, 0
	for range nPods {
		write(fmt.Sprintf("p%d", next), 0)
		next++
		createAPI(fmt.Sprintf("a%d", nextAPI))
		nextAPI++
	}
	creates += 2 * nPods

	hook := &sandboxHook{RuntimeService: f.cri}
	startSoakAgent := func(description string) *agentRun {
		return c.agentWith(hook, description, func(o *nodekit.Options) {
			o.KubeClient = c.agentAPI
			o.Node = node.Options{StatusUpdateFrequency: time.Second, StatusReportFrequency: 2 * time.Second}
			o.APISource = apiserver.Options{MaxRetryInterval: 2 * time.Second}
			o.NodeResources.GC.DisableImages = true
			o.NodeResources.Eviction.Disable = true
		})
	}
	agents := 0
	a := startSoakAgent("soak agent 0")
	restartAgent := func() {
		if err := a.stop(); err != nil {
			violation("stopping the agent: %v", err)
		}
		if !t.Failed() {
			// Its log is printed only if the test fails: as long as it
			// has not, it would only grow the heap the soak measures.
			a.logs.clear()
		}
		agents++
		a = startSoakAgent(fmt.Sprintf("soak agent %d", agents))
	}

	// latestUID is the UID of the agent's pod that runs the latest version
	// of the manifest name, or "": while a manifest changes, the agent
	// holds the old pod (terminating) and the new one side by side.
	latestUID := func(name string) types.UID {
		full, echo := f.pod(name), fmt.Sprintf("echo v%d;", desired[name])
		for _, p := range a.agent.Pods() {
			if p.Namespace+"/"+p.Name != full || len(p.Spec.Containers) == 0 {
				continue
			}
			c := p.Spec.Containers[0]
			if strings.Contains(strings.Join(append(slices.Clone(c.Command), c.Args...), " "), echo) {
				return p.UID
			}
		}
		return ""
	}
	// runningUID reports whether the agent's pod of that UID runs, with
	// every container running.
	runningUID := func(uid types.UID) bool {
		s, ok := a.agent.PodStatus(uid)
		if !ok || s.Phase != v1.PodRunning || len(s.ContainerStatuses) == 0 {
			return false
		}
		for _, c := range s.ContainerStatuses {
			if c.State.Running == nil {
				return false
			}
		}
		return true
	}

	// checkPod checks that the pod of uid runs in one ready sandbox (and,
	// when image is set, one running container of that image); it returns
	// the pod's IDs and why not.
	checkPod := func(name string, uid types.UID, image string) (podIDs, string) {
		sbs, cs := podObjects(t, f.cri, uid)
		ids := podIDs{UID: uid}
		for _, s := range sbs {
			ids.Sandboxes = append(ids.Sandboxes, s.Id)
		}
		var running []*runtimeapi.Container
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running = append(running, c)
				ids.Containers = append(ids.Containers, c.Id)
			}
		}
		slices.Sort(ids.Sandboxes)
		slices.Sort(ids.Containers)
		if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
			return ids, fmt.Sprintf("%s: sandboxes %v, want one ready", name, ids.Sandboxes)
		}
		if image == "" {
			return ids, ""
		}
		if len(running) != 1 {
			return ids, fmt.Sprintf("%s: %d running containers", name, len(running))
		}
		if ref := running[0].ImageRef; ref != imageIDs[image] {
			return ids, fmt.Sprintf("%s: runs image %s, want %s (%s)", name, ref, image, imageIDs[image])
		}
		return ids, ""
	}

	// apiMatches checks the API server's status of pod against the
	// runtime's: Running, the container containerd runs, Ready as wanted.
	apiMatches := func(p *v1.Pod, ids podIDs, ready bool) string {
		s := p.Status
		if s.Phase != v1.PodRunning || len(s.ContainerStatuses) != 1 {
			return fmt.Sprintf("API pod %s: phase %q, %d container statuses", p.Name, s.Phase, len(s.ContainerStatuses))
		}
		cs := s.ContainerStatuses[0]
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		if cs.State.Running == nil || len(ids.Containers) != 1 || id != ids.Containers[0] {
			return fmt.Sprintf("API pod %s: container %s running %t in the API server, containerd runs %v", p.Name, id, cs.State.Running != nil, ids.Containers)
		}
		want := v1.ConditionFalse
		if ready {
			want = v1.ConditionTrue
		}
		if got := podCondition(s, v1.PodReady); got != want || cs.Ready != ready {
			return fmt.Sprintf("API pod %s: Ready %q (container %t) in the API server, want %q", p.Name, got, cs.Ready, want)
		}
		return ""
	}

	// converge waits until every desired pod runs its latest spec, the API
	// server shows what runs, and nothing is left of the others; it returns
	// the healthy pods' IDs, by "static/name" and "api/name".
	converge := func(what string) map[string]podIDs {
		t.Helper()
		var ids map[string]podIDs
		var why string
		deadline := time.Now().Add(soakConverge)
		for {
			ids, why = convergeOnce(ctx, t, soakState{
				f: f, c: c, in: in, cgroups: podCgroups,
				desired: desired, desiredAPI: desiredAPI,
				latestUID: latestUID, runningUID: runningUID, checkPod: checkPod, apiMatches: apiMatches,
				crasher: crasher, liveness: liveness, unready: unready, agentUID: a.podUID,
			})
			if why == "" {
				break
			}
			if time.Now().After(deadline) {
				violation("%s: not converged after %v: %s", what, soakConverge, why)
				return ids
			}
			time.Sleep(200 * time.Millisecond)
		}
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		goroutines = append(goroutines, goruntime.NumGoroutine())
		heaps = append(heaps, int(ms.HeapAlloc))
		podCounts = append(podCounts, len(a.agent.Pods()))
		return ids
	}
	// unchanged checks that the healthy pods of before kept their sandbox
	// and container across the fault.
	unchanged := func(what string, before, after map[string]podIDs) {
		t.Helper()
		for _, n := range slices.Sorted(maps.Keys(before)) {
			b := before[n]
			if got, ok := after[n]; ok && (!slices.Equal(got.Sandboxes, b.Sandboxes) || !slices.Equal(got.Containers, b.Containers)) {
				violation("%s: %s restarted: %+v, was %+v", what, n, got, b)
			}
		}
	}
	containerdBack := func() {
		t.Helper()
		in.run("start", "--version", "1.6", "--name", in.name)
		// The client reconnects with a back-off: wait for it.
		eventually(t, 30*time.Second, "containerd answering again", func() bool {
			_, err := f.cri.ListPodSandbox(ctx, nil)
			return err == nil
		})
	}

	converge("start")
	began := time.Now()
	round := 0
	for ; duration > 0 && time.Since(began) < duration || duration == 0 && round < rounds; round++ {
		if t.Failed() {
			break
		}
		// Churn.
		for _, n := range slices.Sorted(maps.Keys(desired)) {
			switch r := rng.IntN(6); {
			case r == 0 && len(desired) > 1:
				f.remove(n)
				delete(desired, n)
				deletes++
			case r == 1:
				write(n, desired[n]+1)
				updates++
			}
		}
		for _, n := range slices.Sorted(maps.Keys(desiredAPI)) {
			switch r := rng.IntN(6); {
			case r == 0 && len(desiredAPI) > 1:
				if err := c.api.CoreV1().Pods(c.ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
					t.Fatalf("deleting API pod %s: %v", n, err)
				}
				delete(desiredAPI, n)
				deletes++
			case r == 1:
				img := webImage
				if desiredAPI[n] == webImage {
					img = busyboxImage
				}
				patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","image":%q}]}}`, img)
				if _, err := c.api.CoreV1().Pods(c.ns).Patch(ctx, n, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatalf("updating API pod %s: %v", n, err)
				}
				desiredAPI[n] = img
				updates++
			}
		}
		for range rng.IntN(3) {
			write(fmt.Sprintf("p%d", next), 0)
			next++
			createAPI(fmt.Sprintf("a%d", nextAPI))
			nextAPI++
			creates += 2
		}
		converge(fmt.Sprintf("round %d churn", round))
		before := converge(fmt.Sprintf("round %d before the faults", round))
		roundGoroutines = append(roundGoroutines, strconv.Itoa(goroutines[len(goroutines)-1]))
		roundHeaps = append(roundHeaps, fmt.Sprintf("%.1f", float64(heaps[len(heaps)-1])/(1<<20)))
		roundPods = append(roundPods, strconv.Itoa(podCounts[len(podCounts)-1]))

		// The agent restarts.
		restartAgent()
		faults[faultAgent]++
		ids := converge(fmt.Sprintf("round %d %s", round, faultAgent))
		unchanged(fmt.Sprintf("round %d %s", round, faultAgent), before, ids)

		// containerd is killed and started again, the agent idle.
		if err := in.crash(); err != nil {
			t.Fatal(err)
		}
		faults[faultContainerd]++
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond) // down for a while
		containerdBack()
		ids = converge(fmt.Sprintf("round %d %s", round, faultContainerd))
		unchanged(fmt.Sprintf("round %d %s", round, faultContainerd), before, ids)

		// containerd is killed while the agent's RunPodSandbox for a new
		// pod is in flight: after a random part of the shortest time such
		// a call took, to hit containerd at different steps of the
		// sandbox's creation.
		issued, ended := hook.arm()
		halfMadeOf := ""
		write(fmt.Sprintf("p%d", next), 0)
		next++
		creates++
		select {
		case uid := <-issued:
			delay := time.Duration(rng.Float64() * float64(hook.shortest(300*time.Millisecond)))
			time.Sleep(delay)
			if err := in.crash(); err != nil {
				t.Fatal(err)
			}
			faults[faultSandboxInFlight]++
			sandboxCalls++
			select {
			case err := <-ended:
				if err != nil {
					sandboxCallsCut++
					halfMadeOf = uid
					t.Logf("round %d: RunPodSandbox of pod %s failed with containerd killed %v after it was issued: %v", round, uid, delay.Round(time.Millisecond), err)
				} else {
					t.Logf("round %d: RunPodSandbox of pod %s had returned when containerd was killed %v after it was issued", round, uid, delay.Round(time.Millisecond))
				}
			case <-time.After(time.Minute):
				violation("round %d: RunPodSandbox of pod %s did not return within a minute of containerd's kill", round, uid)
			}
		case <-time.After(time.Minute):
			hook.disarm()
			violation("round %d: no RunPodSandbox within a minute of a new manifest", round)
		}
		containerdBack()
		if halfMadeOf != "" {
			// What containerd kept of the cut call, before the agent acts.
			sbs, _ := podObjects(t, f.cri, types.UID(halfMadeOf))
			for _, sb := range sbs {
				halfMade++
				t.Logf("round %d: containerd back with sandbox %.12s (%s) of pod %s", round, sb.Id, sb.State, halfMadeOf)
			}
		}
		ids = converge(fmt.Sprintf("round %d %s", round, faultSandboxInFlight))
		unchanged(fmt.Sprintf("round %d %s", round, faultSandboxInFlight), before, ids)

		// The API server is killed; in every other round the agent restarts
		// while it is down, from its checkpoint.
		c.srv.run("kill")
		faults[faultAPIServer]++
		time.Sleep(time.Duration(1000+rng.IntN(4000)) * time.Millisecond) // down for a while
		if round%2 == 1 {
			restartAgent()
			faults[faultAgentOffline]++
			// Past the checkpoint's grace: the agent runs the API pods from it.
			time.Sleep(apiserver.DefaultCheckpointGrace + 2*time.Second)
			for _, n := range slices.Sorted(maps.Keys(before)) {
				uid := before[n].UID
				if !slices.ContainsFunc(a.agent.Pods(), func(p *v1.Pod) bool { return p.UID == uid }) {
					violation("round %d: the agent restarted with the API server down does not run %s (%s)", round, n, uid)
				}
			}
		}
		c.srv.run("start", "--reuse")
		ids = converge(fmt.Sprintf("round %d %s", round, faultAPIServer))
		unchanged(fmt.Sprintf("round %d %s", round, faultAPIServer), before, ids)

		// The disk fills up while a static and an API pod are created: the
		// static pod's status says why it does not start; nothing running
		// is disturbed; once the disk is freed both start.
		d := diskFiller{dir: filepath.Join(f.rootDir, "soak-fill")}
		bytes, files, err := d.fill()
		if err != nil {
			t.Fatalf("filling %s: %v", f.rootDir, err)
		}
		faults[faultDisk]++
		full := fmt.Sprintf("p%d", next)
		write(full, 0)
		next++
		createAPI(fmt.Sprintf("a%d", nextAPI))
		nextAPI++
		creates += 2
		deadline := time.Now().Add(soakConverge)
		for {
			uid := latestUID(full)
			s, _ := a.agent.PodStatus(uid)
			if uid != "" && s.Reason == volume.ReasonFailedToMakePodDataDirectories {
				t.Logf("round %d: disk full (%d bytes, %d files): %s: %s", round, bytes, files, s.Reason, s.Message)
				break
			}
			if time.Now().After(deadline) {
				violation("round %d: disk full: pod %s's status (reason %q, message %q) does not say why it waits", round, full, s.Reason, s.Message)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, n := range slices.Sorted(maps.Keys(before)) {
			if got, _ := checkPod(n, before[n].UID, ""); !slices.Equal(got.Sandboxes, before[n].Sandboxes) {
				violation("round %d: disk full: %s's sandboxes %v, were %v", round, n, got.Sandboxes, before[n].Sandboxes)
			}
		}
		if err := d.free(); err != nil {
			t.Fatalf("freeing %s: %v", f.rootDir, err)
		}
		ids = converge(fmt.Sprintf("round %d %s", round, faultDisk))
		unchanged(fmt.Sprintf("round %d %s", round, faultDisk), before, ids)
	}

	total := 0
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		total += faults[k]
		kinds = append(kinds, fmt.Sprintf("%s %d", k, faults[k]))
	}
	g0, gmax, h0, hmax := goroutines[0], slices.Max(goroutines), heaps[0], slices.Max(heaps)
	t.Logf("soak: %d rounds in %v; faults injected: %d (%s); RunPodSandbox calls cut by containerd's kill: %d of %d, leaving %d sandboxes for the agent to remove; pods churned: %d created, %d updated, %d deleted; goroutines %d at the start, %d at most, %d at the end; heap %.1f MiB at the start, %.1f at most, %.1f at the end; invariant violations: %d",
		round, time.Since(began).Round(time.Second), total, strings.Join(kinds, ", "), sandboxCallsCut, sandboxCalls, halfMade,
		creates, updates, deletes, g0, gmax, goroutines[len(goroutines)-1],
		float64(h0)/(1<<20), float64(hmax)/(1<<20), float64(heaps[len(heaps)-1])/(1<<20), violations)
	t.Logf("soak: at each round's start, pods %s; goroutines %s; heap (MiB) %s", strings.Join(roundPods, " "), strings.Join(roundGoroutines, " "), strings.Join(roundHeaps, " "))
	last := len(goroutines) - 1
	if limit := g0 + 150 + 30*max(0, podCounts[last]-podCounts[0]); goroutines[last] > limit {
		violation("goroutines: %d at the end, %d at the start (%d and %d pods): more than %d", goroutines[last], g0, podCounts[last], podCounts[0], limit)
	}
	if limit := 2*h0 + 64<<20; heaps[last] > limit {
		violation("heap: %d bytes at the end, %d at the start: more than %d", heaps[last], h0, limit)
	}

	// Clean up through the agent: every manifest and API pod gone, nothing
	// left.
	for n := range desired {
		f.remove(n)
	}
	f.remove(crasher)
	f.remove(liveness)
	for _, n := range append(slices.Collect(maps.Keys(desiredAPI)), unready) {
		if err := c.api.CoreV1().Pods(c.ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting API pod %s: %v", n, err)
		}
	}
	eventually(t, 60*time.Second, "every pod removed", func() bool {
		sbs, cs := inNamespace(t, f.cri, f.ns)
		list, err := c.api.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && len(sbs) == 0 && len(cs) == 0 && len(dirEntries(filepath.Join(f.rootDir, "pods"))) == 0
	})
}

// soakState is what one convergence check of the soak reads.
type soakState struct {
	f          *fixture
	c          *cluster
	in         *instance
	cgroups    *cgroup.PodManager
	desired    map[string]int
	desiredAPI map[string]string

	latestUID  func(name string) types.UID
	runningUID func(types.UID) bool
	checkPod   func(name string, uid types.UID, image string) (podIDs, string)
	apiMatches func(p *v1.Pod, ids podIDs, ready bool) string
	agentUID   func(fullName string) types.UID

	crasher, liveness, unready string
}

// convergeOnce checks the soak's invariants once; it returns the healthy
// pods' IDs and the first invariant that does not hold, or "".
func convergeOnce(ctx context.Context, t *testing.T, s soakState) (map[string]podIDs, string) {
	t.Helper()
	f, c := s.f, s.c
	ids := map[string]podIDs{}
	want := map[types.UID]bool{}
	for _, name := range slices.Sorted(maps.Keys(s.desired)) {
		uid := s.latestUID(name)
		if uid == "" || !s.runningUID(uid) {
			return ids, fmt.Sprintf("%s not running its version %d", f.pod(name), s.desired[name])
		}
		p, why := s.checkPod(f.pod(name), uid, busyboxImage)
		if why != "" {
			return ids, why
		}
		ids["static/"+name] = p
		want[uid] = true
	}
	for _, name := range []string{s.crasher, s.liveness} {
		uid := s.agentUID(f.pod(name))
		if uid == "" {
			return ids, f.pod(name) + " unknown to the agent"
		}
		if _, why := s.checkPod(f.pod(name), uid, ""); why != "" {
			return ids, why
		}
		want[uid] = true
	}
	list, err := c.api.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ids, fmt.Sprintf("listing the API pods: %v", err)
	}
	apiPods := map[string]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if _, mirror := p.Annotations[podmodel.AnnotationMirror]; mirror {
			continue
		}
		if _, ok := s.desiredAPI[p.Name]; !ok && p.Name != s.unready {
			return ids, fmt.Sprintf("API pod %s (deleted %v) still in the API server", p.Name, p.DeletionTimestamp)
		}
		apiPods[p.Name] = p
	}
	for _, name := range append(slices.Sorted(maps.Keys(s.desiredAPI)), s.unready) {
		p := apiPods[name]
		if p == nil {
			return ids, fmt.Sprintf("API pod %s lost from the API server", name)
		}
		if !s.runningUID(p.UID) {
			return ids, fmt.Sprintf("API pod %s not running in the agent", name)
		}
		image := s.desiredAPI[name]
		if name == s.unready {
			image = busyboxImage
		}
		rp, why := s.checkPod("API pod "+name, p.UID, image)
		if why != "" {
			return ids, why
		}
		if why := s.apiMatches(p, rp, name != s.unready); why != "" {
			return ids, why
		}
		if name != s.unready {
			ids["api/"+name] = rp
		}
		want[p.UID] = true
	}

	// Nothing left of the others.
	sbs, cs := inNamespace(t, f.cri, f.ns)
	ready := map[string]bool{}
	for _, sb := range sbs {
		uid := types.UID(sb.Labels[runtime.LabelPodUID])
		if !want[uid] {
			return ids, fmt.Sprintf("sandbox %s of pod %s (%s) left", sb.Id, sb.Labels[runtime.LabelPodName], uid)
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready[sb.Id] = true
		}
	}
	for _, ct := range cs {
		if !want[types.UID(ct.Labels[runtime.LabelPodUID])] {
			return ids, fmt.Sprintf("container %s of pod %s left", ct.Id, ct.Labels[runtime.LabelPodName])
		}
	}
	podsDir := filepath.Join(f.rootDir, "pods")
	for _, d := range dirEntries(podsDir) {
		if !want[types.UID(d)] {
			return ids, "pod directory " + d + " left"
		}
	}
	mounts, err := mountsUnder(podsDir)
	if err != nil {
		return ids, err.Error()
	}
	for _, m := range mounts {
		uid, _, _ := strings.Cut(strings.TrimPrefix(m, podsDir+"/"), "/")
		if !want[types.UID(uid)] {
			return ids, "mount " + m + " left"
		}
	}
	cgs, err := s.cgroups.Pods()
	if err != nil {
		return ids, fmt.Sprintf("listing the pod cgroups: %v", err)
	}
	for _, uid := range cgs {
		if !want[uid] {
			return ids, fmt.Sprintf("cgroup of pod %s left", uid)
		}
	}
	owners, err := ipOwners(s.in)
	if err != nil {
		return ids, fmt.Sprintf("reading the IP reservations: %v", err)
	}
	held := map[string]string{}
	for ip, id := range owners {
		if !ready[id] {
			return ids, fmt.Sprintf("IP %s reserved for %.12s, not a ready sandbox of the test (leaked)", ip, id)
		}
		if other, ok := held[id]; ok {
			return ids, fmt.Sprintf("sandbox %.12s holds two IPs, %s and %s", id, ip, other)
		}
		held[id] = ip
	}
	if len(held) != len(ready) {
		return ids, fmt.Sprintf("%d IP reservations for %d ready sandboxes", len(held), len(ready))
	}
	return ids, ""
}
