package process_test

import (
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"
	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/backend"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/runtime/runtimesuite"
)

func TestMain(m *testing.M) {
	serveIfAsked()       // the test binary is the web server of TestAgentPipeline
	process.RunMonitor() // and the monitor of every container
	// As root, the run fails when a test leaves a process, mount or
	// cgroup behind.
	leakcheck.VerifyHostTestMain(m)
}

// newRuntime returns a process runtime on the state directory.
func newRuntime(t *testing.T, dir string) *backend.Runtime {
	t.Helper()
	rt, err := process.New(process.Options{StateDir: dir, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestConformance(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	runtimesuite.Run(t, func(t *testing.T) runtimesuite.Config {
		dir := t.TempDir()
		var mu sync.Mutex
		rt := newRuntime(t, dir)
		t.Cleanup(func() { mu.Lock(); defer mu.Unlock(); rt.Close() })
		return runtimesuite.Config{
			Runtime:   rt,
			Processes: true,
			Restart: func(t *testing.T) runtime.RuntimeService {
				mu.Lock()
				defer mu.Unlock()
				rt.Close()
				rt = newRuntime(t, dir)
				return rt
			},
		}
	})
}
