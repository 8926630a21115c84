package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// logLines records what a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

// find returns the lines that contain every one of subs.
func (l *logLines) find(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// chanSource is a Source that forwards what the test puts on in.
func chanSource(in <-chan []*v1.Pod) Source {
	return SourceFunc(func(ctx context.Context, snapshots chan<- []*v1.Pod) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case pods := <-in:
				select {
				case snapshots <- pods:
				case <-ctx.Done():
					return nil
				}
			}
		}
	})
}

func idle(ctx context.Context, _ chan<- []*v1.Pod) error {
	<-ctx.Done()
	return nil
}

func TestConfigAdd(t *testing.T) {
	c := NewConfig(ConfigOptions{})
	if err := c.Add("a", SourceFunc(idle)); err != nil {
		t.Fatalf("Add(a) = %v", err)
	}
	tests := []struct {
		name    string
		src     string
		source  Source
		wantErr string
	}{
		{name: "empty name", src: "", source: SourceFunc(idle), wantErr: "sources: empty source name"},
		{name: "duplicate name", src: "a", source: SourceFunc(idle), wantErr: `sources: duplicate source name "a"`},
		{name: "nil source", src: "b", source: nil, wantErr: `sources: nil source "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Add(tt.src, tt.source)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Add() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigAddAfterRunAndRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewConfig(ConfigOptions{})
		if err := c.Add("a", SourceFunc(idle)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		if err := c.Add("b", SourceFunc(idle)); err == nil {
			t.Error("Add after Run succeeded, want an error")
		}
		if err := c.Run(ctx); err == nil {
			t.Error("second Run succeeded, want an error")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestConfigRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fileIn, apiIn := make(chan []*v1.Pod), make(chan []*v1.Pod)
		c := NewConfig(ConfigOptions{})
		if err := c.Add(FileSource, chanSource(fileIn)); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(APIServerSource, chanSource(apiIn)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()

		ready := func() []bool {
			synctest.Wait()
			return []bool{c.SeenSource(FileSource), c.SeenSource(APIServerSource), c.SourcesReady()}
		}
		expect := func(want []op) {
			t.Helper()
			var got []PodUpdate
			for range want {
				got = append(got, <-c.Updates())
			}
			synctest.Wait()
			if n := len(c.Updates()); n != 0 {
				t.Errorf("%d more updates queued than expected", n)
			}
			if diff := cmp.Diff(want, summarize(got)); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
		}

		if diff := cmp.Diff([]bool{false, false, false}, ready()); diff != "" {
			t.Errorf("seen file, api, ready before any snapshot (-want +got):\n%s", diff)
		}

		fileIn <- []*v1.Pod{testPod("a"), testPod("b")}
		expect([]op{{Op: "ADD", Source: FileSource, Pods: []string{"ns/a", "ns/b"}}})
		if diff := cmp.Diff([]bool{true, false, false}, ready()); diff != "" {
			t.Errorf("seen file, api, ready after file's snapshot (-want +got):\n%s", diff)
		}

		apiIn <- nil
		expect([]op{{Op: "ADD", Source: APIServerSource}})
		if diff := cmp.Diff([]bool{true, true, true}, ready()); diff != "" {
			t.Errorf("seen file, api, ready after both snapshots (-want +got):\n%s", diff)
		}

		fileIn <- []*v1.Pod{testPod("a", withPhase(v1.PodRunning)), testPod("c")}
		expect([]op{
			{Op: "REMOVE", Source: FileSource, Pods: []string{"ns/b"}},
			{Op: "ADD", Source: FileSource, Pods: []string{"ns/c"}},
			{Op: "RECONCILE", Source: FileSource, Pods: []string{"ns/a"}},
		})

		// The same pod from another source is that source's own.
		apiIn <- []*v1.Pod{testPod("a")}
		expect([]op{{Op: "ADD", Source: APIServerSource, Pods: []string{"ns/a"}}})

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestConfigRunBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		c := NewConfig(ConfigOptions{UpdatesCapacity: 1})
		sent := make(chan struct{})
		err := c.Add("s", SourceFunc(func(ctx context.Context, snapshots chan<- []*v1.Pod) error {
			var pods []*v1.Pod
			for i := range n {
				pods = append(pods, testPod(fmt.Sprintf("p%d", i)))
				select {
				case snapshots <- append([]*v1.Pod(nil), pods...):
				case <-ctx.Done():
					return nil
				}
			}
			close(sent)
			<-ctx.Done()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()

		synctest.Wait()
		if got := len(c.Updates()); got != 1 {
			t.Errorf("updates queued while nobody reads = %d, want 1 (the capacity)", got)
		}
		if c.SourcesReady() != true {
			t.Error("source not ready after its first snapshot was sent")
		}
		var got []string
		for range n {
			u := <-c.Updates()
			for _, p := range u.Pods {
				got = append(got, u.Op.String()+" "+p.Name)
			}
		}
		<-sent
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("ADD p%d", i))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("updates under backpressure (-want +got):\n%s", diff)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestConfigRunFailedSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logLines
		in := make(chan []*v1.Pod)
		c := NewConfig(ConfigOptions{Logger: logs.logger()})
		if err := c.Add("broken", SourceFunc(func(context.Context, chan<- []*v1.Pod) error {
			return errors.New("cannot start")
		})); err != nil {
			t.Fatal(err)
		}
		if err := c.Add("good", chanSource(in)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()

		in <- []*v1.Pod{testPod("a")}
		u := <-c.Updates()
		if diff := cmp.Diff([]op{{Op: "ADD", Source: "good", Pods: []string{"ns/a"}}}, summarize([]PodUpdate{u})); diff != "" {
			t.Errorf("updates of the good source (-want +got):\n%s", diff)
		}
		synctest.Wait()
		if c.SourcesReady() {
			t.Error("SourcesReady with a source that never delivered a snapshot")
		}
		if got := logs.find(`"msg"="source failed"`, `"source"="broken"`, "cannot start"); len(got) != 1 {
			t.Errorf("log lines for the failed source = %q, want one", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestConfigRunLogsDroppedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logLines
		in := make(chan []*v1.Pod)
		c := NewConfig(ConfigOptions{Logger: logs.logger()})
		if err := c.Add(FileSource, chanSource(in)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()

		in <- []*v1.Pod{testPod("a"), testPod("a", withUID("other")), testPod("bad", withImage(""))}
		<-c.Updates()
		synctest.Wait()
		if got := logs.find(`"msg"="dropping pod"`, `"source"="file"`, `"pod"="ns/a"`, "duplicate pod name"); len(got) != 1 {
			t.Errorf("log lines for the duplicate = %q, want one", got)
		}
		if got := logs.find(`"msg"="dropping pod"`, `"source"="file"`, `"pod"="ns/bad"`, "image"); len(got) != 1 {
			t.Errorf("log lines for the invalid pod = %q, want one", got)
		}
		// The same snapshot again, twice, with a new pod: the rejections
		// are not logged again. (The updates channel holds what these
		// snapshots give.)
		for _, extra := range []string{"b", "c"} {
			in <- []*v1.Pod{testPod("a"), testPod("a", withUID("other")), testPod("bad", withImage("")), testPod(extra)}
			synctest.Wait()
		}
		if got := logs.find(`"msg"="dropping pod"`); len(got) != 2 {
			t.Errorf("log lines for the repeated rejections = %q, want the first two only", got)
		}
		// Resolved, then back: logged again.
		in <- []*v1.Pod{testPod("a")}
		synctest.Wait()
		in <- []*v1.Pod{testPod("a"), testPod("bad", withImage(""))}
		synctest.Wait()
		if got := logs.find(`"msg"="dropping pod"`, `"pod"="ns/bad"`); len(got) != 2 {
			t.Errorf("log lines for the invalid pod after it came back = %d, want 2", len(got))
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestConfigRunReturnsWhenSourceSendsAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewConfig(ConfigOptions{})
		// A careless source: plain sends that ignore ctx, and a last one after
		// ctx ended.
		if err := c.Add("careless", SourceFunc(func(ctx context.Context, snapshots chan<- []*v1.Pod) error {
			snapshots <- []*v1.Pod{testPod("a")}
			<-ctx.Done()
			snapshots <- []*v1.Pod{testPod("b")}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		<-c.Updates()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		if n := len(c.Updates()); n != 0 {
			t.Errorf("%d updates sent after cancel, want 0", n)
		}
	})
}

func TestConfigSeenOnlyAfterUpdatesSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aIn, bIn := make(chan []*v1.Pod), make(chan []*v1.Pod)
		c := NewConfig(ConfigOptions{UpdatesCapacity: 1})
		if err := c.Add("a", chanSource(aIn)); err != nil {
			t.Fatal(err)
		}
		if err := c.Add("b", chanSource(bIn)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()

		aIn <- []*v1.Pod{testPod("a")} // fills the buffer
		synctest.Wait()                // once a's ADD is in it
		bIn <- []*v1.Pod{testPod("b")} // its ADD cannot be sent yet
		synctest.Wait()
		if !c.SeenSource("a") || c.SeenSource("b") || c.SourcesReady() {
			t.Errorf("with b's ADD unsent: seen a = %v, seen b = %v, ready = %v; want true, false, false",
				c.SeenSource("a"), c.SeenSource("b"), c.SourcesReady())
		}
		<-c.Updates()
		synctest.Wait()
		if !c.SeenSource("b") || !c.SourcesReady() {
			t.Errorf("with b's ADD sent: seen b = %v, ready = %v; want true, true", c.SeenSource("b"), c.SourcesReady())
		}
		<-c.Updates()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}
