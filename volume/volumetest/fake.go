package volumetest

import (
	"context"
	"fmt"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volume"
)

// FakePluginName is the name of a FakePlugin whose PluginName is empty.
const FakePluginName = "nodekit.io/fake"

// Call is one call a FakePlugin received.
type Call struct {
	// Op is "SetUp" or "TearDown".
	Op     string
	PodUID types.UID
	Volume string
}

// FakePlugin is a volume.Plugin that sets up a volume as an empty
// directory at the request's Dir, records its calls, and fails the volumes
// it is told to. Its zero value is ready to use and supports every volume.
// It is safe for concurrent use.
type FakePlugin struct {
	// PluginName is its name. Defaults to FakePluginName.
	PluginName string
	// Supports decides which volumes it handles. Defaults to all.
	Supports func(vol *v1.Volume) bool

	mu          sync.Mutex
	setUpErr    map[string]error
	tearDownErr map[string]error
	calls       []Call
}

var _ volume.Plugin = (*FakePlugin)(nil)

// Name returns PluginName, or FakePluginName.
func (f *FakePlugin) Name() string {
	if f.PluginName == "" {
		return FakePluginName
	}
	return f.PluginName
}

// CanSupport calls Supports, or returns true.
func (f *FakePlugin) CanSupport(vol *v1.Volume) bool {
	return f.Supports == nil || f.Supports(vol)
}

// FailSetUp makes SetUp of the volumes named name fail with err (nil:
// succeed again).
func (f *FakePlugin) FailSetUp(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setUpErr == nil {
		f.setUpErr = map[string]error{}
	}
	f.setUpErr[name] = err
}

// FailTearDown makes TearDown of the volumes named name fail with err
// (nil: succeed again).
func (f *FakePlugin) FailTearDown(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tearDownErr == nil {
		f.tearDownErr = map[string]error{}
	}
	f.tearDownErr[name] = err
}

// Calls returns the calls received so far, in order.
func (f *FakePlugin) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

func (f *FakePlugin) record(op string, uid types.UID, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Call{Op: op, PodUID: uid, Volume: name})
	if op == "SetUp" {
		return f.setUpErr[name]
	}
	return f.tearDownErr[name]
}

// SetUp records the call, then fails if told to, else creates req.Dir.
func (f *FakePlugin) SetUp(_ context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	if err := f.record("SetUp", req.Pod.UID, req.Volume.Name); err != nil {
		return volume.Mount{}, err
	}
	if err := os.MkdirAll(req.Dir, 0o755); err != nil {
		return volume.Mount{}, fmt.Errorf("volumetest: %w", err)
	}
	return volume.Mount{Name: req.Volume.Name, HostPath: req.Dir}, nil
}

// TearDown records the call, then fails if told to, else removes req.Dir.
func (f *FakePlugin) TearDown(_ context.Context, req volume.TearDownRequest) error {
	if err := f.record("TearDown", req.PodUID, req.Name); err != nil {
		return err
	}
	if err := os.RemoveAll(req.Dir); err != nil {
		return fmt.Errorf("volumetest: %w", err)
	}
	return nil
}
