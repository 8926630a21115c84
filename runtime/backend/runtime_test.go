package backend_test

import (
	"sync"
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/backend"
	"github.com/nodekit/nodekit/runtime/runtimesuite"
)

// TestConformance runs the conformance suite on the adapter over the
// example's Backend. A restart is a new adapter on the same state
// directory and the same Backend (whose processes live on).
func TestConformance(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	runtimesuite.Run(t, func(t *testing.T) runtimesuite.Config {
		b := &execBackend{}
		dir := t.TempDir()
		var mu sync.Mutex
		rt := backend.NewRuntime(b, backend.Options{StateDir: dir})
		t.Cleanup(func() { mu.Lock(); defer mu.Unlock(); rt.Close() })
		return runtimesuite.Config{
			Runtime:   rt,
			Processes: true,
			Restart: func(t *testing.T) runtime.RuntimeService {
				mu.Lock()
				defer mu.Unlock()
				rt.Close()
				rt = backend.NewRuntime(b, backend.Options{StateDir: dir})
				return rt
			},
		}
	})
}
