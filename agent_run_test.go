package nodekit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
)

// TestAgentAdd: a part added with Agent.Add runs with the agent's own
// parts from its one list; a part that fails stops the agent with its
// error; Add after Run is refused.
func TestAgentAdd(t *testing.T) {
	newAgent := func() *nodekit.Agent {
		rt := runtimetest.New(runtimetest.Options{})
		t.Cleanup(rt.Close)
		a, err := nodekit.New(nodekit.Options{
			NodeName: "node1",
			Sources:  []nodekit.NamedSource{{Name: "test", Source: make(sources.Chan)}},
			Runtime:  rt,
			RootDir:  t.TempDir(),
			Cgroups:  cgroup.PodManagerOptions{Disabled: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	a := newAgent()
	started, stopped := make(chan struct{}), make(chan struct{})
	if err := a.Add("mine", run.Func(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	<-started
	if err := a.Add("late", run.Func(func(context.Context) error { return nil })); !errors.Is(err, run.ErrStarted) {
		t.Errorf("Add after Run = %v, want run.ErrStarted", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Run returned before the added part stopped")
	}

	b := newAgent()
	boom := errors.New("boom")
	b.Add("failing", run.Func(func(context.Context) error { return boom }))
	if err := b.Run(t.Context()); !errors.Is(err, boom) || err.Error() != "nodekit: failing: boom" {
		t.Fatalf("Run = %v, want nodekit: failing: boom", err)
	}
}

// TestNewGivesSourcesTheNodeName: a file source takes the agent's node
// name; one made for another node fails New with a clear error.
func TestNewGivesSourcesTheNodeName(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	newAgent := func(src *file.Source) error {
		_, err := nodekit.New(nodekit.Options{
			NodeName: "node1",
			Sources:  []nodekit.NamedSource{{Name: sources.FileSource, Source: src}},
			Runtime:  rt,
			RootDir:  t.TempDir(),
		})
		return err
	}
	mine, err := file.New(file.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := newAgent(mine); err != nil {
		t.Fatalf("New with a file source without a node name: %v", err)
	}
	other, err := file.New(file.Options{Path: t.TempDir(), NodeName: "node2"})
	if err != nil {
		t.Fatal(err)
	}
	want := `nodekit: source "file": file: Options.NodeName "node2" is not the agent's node name "node1" (leave it empty)`
	if err := newAgent(other); err == nil || err.Error() != want {
		t.Fatalf("New with another node's file source = %v, want %s", err, want)
	}
}
