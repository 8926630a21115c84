package runtimesuite

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

func testSandboxLifecycle(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	st := s.sandboxStatus(sb.id)
	if st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("new sandbox is %s, want SANDBOX_READY", st.State)
	}
	if st.Id != sb.id || st.GetMetadata().GetName() != sb.config.Metadata.Name ||
		st.GetMetadata().GetNamespace() != sb.config.Metadata.Namespace || st.GetMetadata().GetUid() != sb.config.Metadata.Uid {
		t.Errorf("sandbox status id/metadata = %s/%v, want %s/%v", st.Id, st.Metadata, sb.id, sb.config.Metadata)
	}
	if st.CreatedAt == 0 {
		t.Error("sandbox status has no CreatedAt")
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.Runtime.StopPodSandbox(ctx, sb.id); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if st := s.sandboxStatus(sb.id); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("stopped sandbox is %s, want SANDBOX_NOTREADY", st.State)
	}
	if err := s.Runtime.RemovePodSandbox(ctx, sb.id); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if _, err := s.Runtime.PodSandboxStatus(ctx, sb.id, false); !runtime.IsNotFound(err) {
		t.Errorf("PodSandboxStatus of a removed sandbox: err = %v, want NotFound", err)
	}
	list, err := s.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: sb.id})
	if err != nil || len(list) != 0 {
		t.Errorf("ListPodSandbox of a removed sandbox = %v, %v; want none", list, err)
	}
}

func testContainerLifecycle(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.create(sb, "main", "sleep 3600", containerOpts{})
	st := s.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.CreatedAt == 0 || st.StartedAt != 0 {
		t.Errorf("new container: state %s createdAt %d startedAt %d; want CONTAINER_CREATED, set, 0", st.State, st.CreatedAt, st.StartedAt)
	}
	if img := st.GetImage().GetImage(); st.GetMetadata().GetName() != "main" || (img != s.Image && !strings.HasSuffix(img, "/"+s.Image)) {
		t.Errorf("container metadata/image = %v/%v", st.Metadata, st.Image)
	}
	s.start(id)
	st = s.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt < st.CreatedAt {
		t.Errorf("started container: state %s startedAt %d (created %d); want CONTAINER_RUNNING", st.State, st.StartedAt, st.CreatedAt)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.Runtime.StartContainer(ctx, id); err == nil {
		t.Error("StartContainer of a running container succeeded, want an error")
	}
	s.stop(id, 0)
	st = s.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("stopped container is %s, want CONTAINER_EXITED", st.State)
	}
	if st.ExitCode == 0 || st.FinishedAt < st.StartedAt || st.Reason == "" {
		t.Errorf("stopped container: exit code %d reason %q finishedAt %d; want non-zero, a reason, after start", st.ExitCode, st.Reason, st.FinishedAt)
	}
	if err := s.Runtime.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := s.Runtime.ContainerStatus(ctx, id, false); !runtime.IsNotFound(err) {
		t.Errorf("ContainerStatus of a removed container: err = %v, want NotFound", err)
	}
	// Removing a sandbox removes its containers, running or not.
	id2 := s.run(sb, "second", "sleep 3600", containerOpts{})
	if err := s.Runtime.RemovePodSandbox(ctx, sb.id); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if _, err := s.Runtime.ContainerStatus(ctx, id2, false); !runtime.IsNotFound(err) {
		t.Errorf("ContainerStatus of a container of a removed sandbox: err = %v, want NotFound", err)
	}
}

func testExitCodes(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	for _, tc := range []struct {
		script string
		code   int32
		reason string
	}{
		{"exit 3", 3, "Error"},
		{"true", 0, "Completed"},
		{"sleep 0.2; exit 42", 42, "Error"},
	} {
		id := s.run(sb, "c"+randomHex(3), tc.script, containerOpts{})
		st := s.waitExited(id)
		if st.ExitCode != tc.code || st.Reason != tc.reason {
			t.Errorf("%q: exit code %d reason %q, want %d %q", tc.script, st.ExitCode, st.Reason, tc.code, tc.reason)
		}
		// Both times are set. containerd records a task's start once
		// the start call returns, so a process that exits at once may
		// show a finish a few milliseconds before its start (seen: 0.3ms
		// and 2.8ms); more than a second before is an error.
		if st.StartedAt == 0 || st.FinishedAt == 0 || st.FinishedAt < st.StartedAt-int64(time.Second) {
			t.Errorf("%q: startedAt %d, finishedAt %d: want both set, the finish not before the start", tc.script, st.StartedAt, st.FinishedAt)
		}
	}
}

func testNotFound(s *suite) {
	t := s.t
	ctx, cancel := s.ctx()
	defer cancel()
	unknown := strings.Repeat("0", 63) + "1"
	if _, err := s.Runtime.ContainerStatus(ctx, unknown, false); !runtime.IsNotFound(err) {
		t.Errorf("ContainerStatus(unknown): err = %v, want NotFound", err)
	}
	if _, err := s.Runtime.PodSandboxStatus(ctx, unknown, false); !runtime.IsNotFound(err) {
		t.Errorf("PodSandboxStatus(unknown): err = %v, want NotFound", err)
	}
	if err := s.Runtime.StartContainer(ctx, unknown); !runtime.IsNotFound(err) {
		t.Errorf("StartContainer(unknown): err = %v, want NotFound", err)
	}
	// The CRI: removing what does not exist succeeds. (Stopping it is
	// NotFound on containerd 1.6 and success on later versions: both pass.)
	if err := s.Runtime.RemoveContainer(ctx, unknown); err != nil {
		t.Errorf("RemoveContainer(unknown) = %v, want nil", err)
	}
	if err := s.Runtime.RemovePodSandbox(ctx, unknown); err != nil {
		t.Errorf("RemovePodSandbox(unknown) = %v, want nil", err)
	}
	if err := s.Runtime.StopContainer(ctx, unknown, 0); err != nil && !runtime.IsNotFound(err) {
		t.Errorf("StopContainer(unknown) = %v, want nil or NotFound", err)
	}
	if err := s.Runtime.StopPodSandbox(ctx, unknown); err != nil && !runtime.IsNotFound(err) {
		t.Errorf("StopPodSandbox(unknown) = %v, want nil or NotFound", err)
	}
	sb := s.newSandbox(nil, nil)
	if _, err := s.Runtime.CreateContainer(ctx, unknown, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: s.Image}, Command: []string{"true"},
	}, sb.config); err == nil {
		t.Error("CreateContainer in an unknown sandbox succeeded")
	}
}

func testIdempotent(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "main", "sleep 3600", containerOpts{})
	s.stop(id, 0)
	s.stop(id, 0)
	first := s.status(id)
	s.stop(id, 5)
	if again := s.status(id); again.ExitCode != first.ExitCode || again.FinishedAt != first.FinishedAt {
		t.Errorf("stopping an exited container changed it: %d@%d, then %d@%d", first.ExitCode, first.FinishedAt, again.ExitCode, again.FinishedAt)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	for i := range 2 {
		if err := s.Runtime.RemoveContainer(ctx, id); err != nil {
			t.Errorf("RemoveContainer #%d: %v", i+1, err)
		}
	}
	for i := range 2 {
		if err := s.Runtime.StopPodSandbox(ctx, sb.id); err != nil {
			t.Errorf("StopPodSandbox #%d: %v", i+1, err)
		}
	}
	for i := range 2 {
		if err := s.Runtime.RemovePodSandbox(ctx, sb.id); err != nil {
			t.Errorf("RemovePodSandbox #%d: %v", i+1, err)
		}
	}
}

func testListFilters(s *suite) {
	t := s.t
	sb1 := s.newSandbox(map[string]string{"suite.nodekit.io/group": "a"}, nil)
	sb2 := s.newSandbox(map[string]string{"suite.nodekit.io/group": "b"}, nil)
	running := s.run(sb1, "running", "sleep 3600", containerOpts{labels: map[string]string{"suite.nodekit.io/role": "x"}})
	created := s.create(sb1, "created", "sleep 3600", containerOpts{})
	other := s.run(sb2, "other", "sleep 3600", containerOpts{labels: map[string]string{"suite.nodekit.io/role": "x"}})
	ctx, cancel := s.ctx()
	defer cancel()

	ids := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		list, err := s.Runtime.ListContainers(ctx, f)
		if err != nil {
			t.Fatalf("ListContainers(%v): %v", f, err)
		}
		var out []string
		for _, c := range list {
			if c.PodSandboxId == sb1.id || c.PodSandboxId == sb2.id {
				out = append(out, c.Id)
			}
		}
		slices.Sort(out)
		return out
	}
	sorted := func(x ...string) []string { slices.Sort(x); return x }
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all", nil, sorted(running, created, other)},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb1.id}, sorted(running, created)},
		{"id", &runtimeapi.ContainerFilter{Id: created}, []string{created}},
		{"state", &runtimeapi.ContainerFilter{PodSandboxId: sb1.id, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, []string{running}},
		{"label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"suite.nodekit.io/role": "x"}}, sorted(running, other)},
		{"pod", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{runtime.LabelPodUID: sb2.config.Metadata.Uid}}, []string{other}},
	} {
		if got := ids(tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("ListContainers %s = %v, want %v", tc.name, got, tc.want)
		}
	}
	sbs := func(f *runtimeapi.PodSandboxFilter) []string {
		t.Helper()
		list, err := s.Runtime.ListPodSandbox(ctx, f)
		if err != nil {
			t.Fatalf("ListPodSandbox(%v): %v", f, err)
		}
		var out []string
		for _, x := range list {
			if x.Id == sb1.id || x.Id == sb2.id {
				out = append(out, x.Id)
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := sbs(nil), sorted(sb1.id, sb2.id); !slices.Equal(got, want) {
		t.Errorf("ListPodSandbox all = %v, want %v", got, want)
	}
	if got := sbs(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"suite.nodekit.io/group": "b"}}); !slices.Equal(got, []string{sb2.id}) {
		t.Errorf("ListPodSandbox by label = %v, want [%s]", got, sb2.id)
	}
	if got := sbs(&runtimeapi.PodSandboxFilter{Id: sb1.id}); !slices.Equal(got, []string{sb1.id}) {
		t.Errorf("ListPodSandbox by id = %v, want [%s]", got, sb1.id)
	}
	if err := s.Runtime.StopPodSandbox(ctx, sb2.id); err != nil {
		t.Fatal(err)
	}
	if got := sbs(&runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}); !slices.Equal(got, []string{sb1.id}) {
		t.Errorf("ListPodSandbox ready = %v, want [%s]", got, sb1.id)
	}
}

func testLabelsAnnotations(s *suite) {
	t := s.t
	labels := map[string]string{"suite.nodekit.io/a": "1", "example.com/b": "two words"}
	annotations := map[string]string{"suite.nodekit.io/note": "x=y, z", runtime.AnnotationRestartCount: "4"}
	sb := s.newSandbox(labels, annotations)
	id := s.create(sb, "main", "sleep 3600", containerOpts{labels: labels, annotations: annotations})
	contains := func(what string, got, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s[%q] = %q, want %q (all: %v)", what, k, got[k], v, got)
			}
		}
	}
	st := s.sandboxStatus(sb.id)
	contains("sandbox status labels", st.Labels, sb.config.Labels)
	contains("sandbox status annotations", st.Annotations, annotations)
	ctx, cancel := s.ctx()
	defer cancel()
	list, err := s.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: sb.id})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListPodSandbox: %v, %v", list, err)
	}
	contains("sandbox list labels", list[0].Labels, sb.config.Labels)
	contains("sandbox list annotations", list[0].Annotations, annotations)
	cs := s.status(id)
	contains("container status labels", cs.Labels, labels)
	contains("container status annotations", cs.Annotations, annotations)
	cl, err := s.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id})
	if err != nil || len(cl) != 1 {
		t.Fatalf("ListContainers: %v, %v", cl, err)
	}
	contains("container list labels", cl[0].Labels, labels)
	contains("container list annotations", cl[0].Annotations, annotations)
	if !maps.Equal(labels, map[string]string{"suite.nodekit.io/a": "1", "example.com/b": "two words"}) {
		t.Error("the runtime changed the caller's labels map")
	}
}

func testEvents(s *suite) {
	t := s.t
	es, ok := s.Runtime.(runtime.ContainerEventStreamer)
	if !ok {
		t.Skip("the runtime has no event stream (runtime.ContainerEventStreamer)")
	}
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan *runtimeapi.ContainerEventResponse, 100)
	established := make(chan struct{})
	errc := make(chan error, 1)
	ended := false // errc was read
	go func() {
		errc <- es.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	defer func() {
		cancel()
		if !ended {
			<-errc
		}
	}()
	streamEnded := func(err error, got any) {
		ended = true
		if runtime.IsUnimplemented(err) {
			// A CRI client sets the stream up before it learns that
			// the runtime (containerd 1.6) has no events.
			t.Skipf("the runtime does not implement GetContainerEvents: %v", err)
		}
		t.Fatalf("GetContainerEvents ended: %v (events so far %v)", err, got)
	}
	select {
	case <-established:
	case err := <-errc:
		streamEnded(err, nil)
	case <-time.After(time.Minute):
		t.Fatal("GetContainerEvents: no stream after a minute")
	}
	// The callback tells that the request went out, not that the runtime
	// has subscribed: an event of a sandbox made now may come before the
	// subscription and be lost. The stream is known to be live once it
	// carries a sandbox's own STARTED event (its ContainerId is the
	// sandbox's); a sandbox whose event does not come in a while is
	// followed by another, so a slow runtime only costs sandboxes.
	var sb *sandbox
	probes := map[string]*sandbox{}
	live := time.After(time.Minute)
	for sb == nil {
		if len(probes) < 6 {
			p := s.newSandbox(nil, nil)
			probes[p.id] = p
		}
		again := time.After(10 * time.Second)
	wait:
		for sb == nil {
			select {
			case ev := <-ch:
				if p := probes[ev.ContainerId]; p != nil && ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT {
					sb = p
				}
			case err := <-errc:
				streamEnded(err, nil)
			case <-again:
				break wait
			case <-live:
				t.Fatalf("no STARTED event of any of %d sandboxes after a minute", len(probes))
			}
		}
	}

	// Each step waits for its event before the next: containerd 2.x
	// sends STOPPED from its exit handler, which may run after
	// StopContainer returned, so a removal made at once could send
	// DELETED first.
	var got []runtimeapi.ContainerEventType
	id := ""
	timeout := time.After(time.Minute)
	await := func(typ runtimeapi.ContainerEventType) {
		t.Helper()
		for {
			select {
			case ev := <-ch:
				if ev.ContainerId != id {
					continue
				}
				got = append(got, ev.ContainerEventType)
				if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT &&
					ev.GetPodSandboxStatus().GetId() != sb.id {
					t.Errorf("%s event: sandbox status of %q, want %q", ev.ContainerEventType, ev.GetPodSandboxStatus().GetId(), sb.id)
				}
				if ev.ContainerEventType == typ {
					return
				}
			case err := <-errc:
				streamEnded(err, got)
			case <-timeout:
				t.Fatalf("events of the container after a minute: %v, want %s", got, typ)
			}
		}
	}
	id = s.run(sb, "main", "sleep 3600", containerOpts{})
	await(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	s.stop(id, 0)
	await(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	rctx, rcancel := s.ctx()
	defer rcancel()
	if err := s.Runtime.RemoveContainer(rctx, id); err != nil {
		t.Fatal(err)
	}
	await(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	want := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
	}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// testExecSync runs on every runtime: exec in a running container
// succeeds, exec in an exited one fails.
func testExecSync(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "main", "sleep 3600", containerOpts{})
	ctx, cancel := s.ctx()
	defer cancel()
	if _, _, err := s.Runtime.ExecSync(ctx, id, []string{"true"}, 10*time.Second); err != nil {
		t.Errorf("ExecSync(true): %v", err)
	}
	s.stop(id, 0)
	if _, _, err := s.Runtime.ExecSync(ctx, id, []string{"true"}, 10*time.Second); err == nil {
		t.Error("ExecSync in an exited container succeeded")
	}
	if _, _, err := s.Runtime.ExecSync(ctx, strings.Repeat("0", 63)+"1", []string{"true"}, 10*time.Second); err == nil {
		t.Error("ExecSync in an unknown container succeeded")
	}
}

func testExecSyncReal(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "main", "sleep 3600", containerOpts{env: map[string]string{"SUITE_VAR": "v1"}})
	ctx, cancel := s.ctx()
	defer cancel()
	stdout, stderr, err := s.Runtime.ExecSync(ctx, id, []string{"sh", "-c", "echo out $SUITE_VAR; echo err >&2"}, 30*time.Second)
	if err != nil || string(stdout) != "out v1\n" || string(stderr) != "err\n" {
		t.Errorf("ExecSync(echo) = %q, %q, %v; want \"out v1\\n\", \"err\\n\", nil", stdout, stderr, err)
	}
	_, _, err = s.Runtime.ExecSync(ctx, id, []string{"sh", "-c", "exit 7"}, 30*time.Second)
	var es interface{ ExitStatus() int }
	if !errors.As(err, &es) || es.ExitStatus() != 7 {
		t.Errorf("ExecSync(exit 7): err = %v, want an error with ExitStatus() 7", err)
	}
	start := time.Now()
	_, _, err = s.Runtime.ExecSync(ctx, id, []string{"sleep", "30"}, time.Second)
	if !runtime.IsDeadlineExceeded(err) {
		t.Errorf("ExecSync(sleep 30, timeout 1s): err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < time.Second || d > 25*time.Second {
		t.Errorf("ExecSync(sleep 30, timeout 1s) took %s", d)
	}
}

func testLogs(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "logger", "echo hello; echo oops >&2; printf 'no newline'", containerOpts{})
	st := s.waitExited(id)
	if st.LogPath == "" {
		t.Fatal("container status has no log path")
	}
	want := sb.config.LogDirectory + "/logger/0.log"
	if st.LogPath != want {
		t.Errorf("log path = %q, want %q", st.LogPath, want)
	}
	// An unterminated last line is partial, as containerd writes it.
	wantLines := []string{"stdout F hello", "stderr F oops", "stdout P no newline"}
	lines := s.pollLog(want, func(lines []string) bool {
		for _, w := range wantLines {
			if !slices.Contains(lines, w) {
				return false
			}
		}
		return true
	})
	for _, w := range wantLines {
		if !slices.Contains(lines, w) {
			t.Errorf("log lines %q lack %q", lines, w)
		}
	}
}

func testEnvWorkingDir(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "env", `echo "var=$SUITE_VAR"; pwd`, containerOpts{
		env:        map[string]string{"SUITE_VAR": "a b=c"},
		workingDir: "/etc",
	})
	st := s.waitExited(id)
	if st.ExitCode != 0 {
		t.Fatalf("exit code %d (%s: %s)", st.ExitCode, st.Reason, st.Message)
	}
	lines := s.pollLog(st.LogPath, func(lines []string) bool { return len(lines) >= 2 })
	if !slices.Equal(lines, []string{"stdout F var=a b=c", "stdout F /etc"}) {
		t.Errorf("log lines = %q, want the variable and /etc", lines)
	}
}

// testStopGraceful: a container that exits on SIGTERM stops before its
// grace period ends, with the exit code it chose.
func testStopGraceful(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "graceful", `trap "exit 0" TERM; echo ready; while true; do sleep 0.2; done`, containerOpts{})
	s.waitLog(sb, "graceful", "stdout F ready")
	start := time.Now()
	s.stop(id, 60)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a container that exits on SIGTERM took %s to stop", d)
	}
	if st := s.status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 0 {
		t.Errorf("after SIGTERM: %s exit code %d, want CONTAINER_EXITED 0", st.State, st.ExitCode)
	}
}

// testStopTimeout: a container that ignores SIGTERM is killed when its
// grace period is over: exit code 137.
func testStopTimeout(s *suite) {
	t := s.t
	sb := s.newSandbox(nil, nil)
	id := s.run(sb, "stubborn", `trap "" TERM; echo ready; while true; do sleep 0.2; done`, containerOpts{})
	s.waitLog(sb, "stubborn", "stdout F ready")
	start := time.Now()
	s.stop(id, 2)
	d := time.Since(start)
	if d < 2*time.Second || d > 2*time.Second+s.StopTimeout {
		t.Errorf("stopping a container that ignores SIGTERM with a 2s grace period took %s", d)
	}
	if st := s.status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Errorf("after SIGKILL: %s exit code %d, want CONTAINER_EXITED 137", st.State, st.ExitCode)
	}
}

// pollLog reads the log at path until done holds for its lines, for up to
// a minute, and returns the last lines read. A container's exit does not
// mean its log is complete: containerd copies the last output to the file
// from a goroutine that the exit does not wait for.
func (s *suite) pollLog(path string, done func([]string) bool) []string {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var lines []string
		if _, err := readFileIfExists(path); err == nil {
			lines = s.readLog(path)
			if done(lines) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			return lines
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the container's log has the line, so that a test
// signals a shell only after it set its traps.
func (s *suite) waitLog(sb *sandbox, name, line string) {
	s.t.Helper()
	path := sb.config.LogDirectory + "/" + name + "/0.log"
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if data, err := readFileIfExists(path); err == nil && strings.Contains(string(data), strings.TrimPrefix(line, "stdout F ")) {
			if slices.Contains(s.readLog(path), line) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("log %s has no line %q after a minute", path, line)
}

func testRestart(s *suite) {
	t := s.t
	if s.Restart == nil {
		t.Skip("the runtime cannot be restarted (Config.Restart is nil)")
	}
	sb := s.newSandbox(nil, nil)
	long := s.run(sb, "long", "sleep 3600", containerOpts{annotations: map[string]string{runtime.AnnotationRestartCount: "0"}})
	short := s.run(sb, "short", "sleep 1; exit 5", containerOpts{})
	created := s.create(sb, "created", "sleep 3600", containerOpts{})
	before := s.status(long)

	s.Runtime = s.Restart(t)

	after := s.status(long)
	if after.State != runtimeapi.ContainerState_CONTAINER_RUNNING || after.StartedAt != before.StartedAt {
		t.Errorf("after a restart the running container is %s started at %d, want CONTAINER_RUNNING started at %d", after.State, after.StartedAt, before.StartedAt)
	}
	if after.Annotations[runtime.AnnotationRestartCount] != "0" {
		t.Errorf("after a restart the restart count annotation is %q", after.Annotations[runtime.AnnotationRestartCount])
	}
	if st := s.waitExited(short); st.ExitCode != 5 {
		t.Errorf("after a restart the short container exited %d, want 5", st.ExitCode)
	}
	if st := s.status(created); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("after a restart the created container is %s", st.State)
	}
	if st := s.sandboxStatus(sb.id); st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("after a restart the sandbox is %s", st.State)
	}
	s.start(created)
	s.stop(long, 0)
	s.stop(created, 0)
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.Runtime.RemovePodSandbox(ctx, sb.id); err != nil {
		t.Errorf("RemovePodSandbox after a restart: %v", err)
	}
}
